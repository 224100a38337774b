//! Device limits: a tensor larger than the adapter lets one binding hold is
//! a typed error naming the tensor, never a wgpu validation panic.

use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
use etwgpu_format::{DType, Program};

#[test]
fn a_tensor_over_the_binding_limit_is_a_typed_error() {
    let Some(rt) = crate::runtime() else { return };
    let limit = rt.device().limits().max_storage_buffer_binding_size;
    // One f32 more than the limit allows.
    let n = limit / 4 + 1;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[n]);
    let out = g.tensor(DType::F32, &[n]);
    g.op("aten.relu.default", &[x, out]).inputs(&[x]).outputs(&[out]);
    let program = Program::from_bytes(ProgramBuilder::single_delegate(g).to_bytes()).expect("parses");
    match rt.load(&program, "forward") {
        Ok(_) => panic!("a {n}-element tensor loaded past a {limit}-byte binding limit"),
        Err(e) => match e {
            etwgpu_runtime::Error::TensorTooLarge { value, bytes, limit: l, .. } => {
                assert_eq!((value, bytes, l), (x.0, n * 4, limit), "{e}");
            }
            other => panic!("expected TensorTooLarge, got {other}"),
        },
    }
}
