//! Device loss: when the device goes away (here: destroyed on purpose),
//! `run` returns an error instead of panicking, and a new runtime can be
//! created afterwards in the same process.

use etwgpu_format::Program;
use etwgpu_runtime::{Runtime, Tensor};

#[test]
fn a_lost_device_is_an_error_and_a_new_runtime_works() {
    let Some(shared) = crate::runtime() else { return };
    drop(shared);
    // A private runtime: destroying it must not disturb other tests.
    let rt = Runtime::new().expect("a second runtime");
    let d = crate::fixtures_dir().join("one_op");
    let program = Program::open(d.join("model.pte")).expect("fixture parses");
    let inputs: Vec<Tensor> =
        (0..2).map(|i| Tensor::read_npy(d.join(format!("call0.in{i}.npy"))).expect("input")).collect();
    let mut method = rt.load(&program, "forward").expect("loads");
    method.run(&inputs).expect("runs before the loss");
    rt.device().destroy();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| method.run(&inputs)));
    match r {
        Ok(Err(e)) => eprintln!("after the loss: {e}"),
        Ok(Ok(_)) => panic!("run succeeded on a destroyed device"),
        Err(_) => panic!("run panicked on a destroyed device"),
    }
    let fresh = Runtime::new().expect("a new runtime after the loss");
    let mut again = fresh.load(&program, "forward").expect("loads again");
    let out = again.run(&inputs).expect("runs on the new device");
    assert_eq!(out[0].bytes, Tensor::read_npy(d.join("call0.out0.npy")).expect("golden").bytes);
}
