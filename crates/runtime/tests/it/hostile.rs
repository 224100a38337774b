//! The hostile files of `test_data/hostile/` that parse (their problem is
//! only visible to a load) must fail `Runtime::load` with a typed error
//! naming the problem; files that do not parse are covered by
//! `etwgpu-format`'s own tests.

use etwgpu_format::Program;
use etwgpu_runtime::Error;

fn load_error(name: &str) -> Option<Error> {
    let rt = crate::runtime()?;
    let path = crate::fixtures_dir().join("../hostile").join(name);
    let program = Program::open(&path).unwrap_or_else(|e| panic!("{name} should parse: {e}"));
    match rt.load(&program, "forward") {
        Ok(_) => panic!("{name} loaded"),
        Err(e) => Some(e),
    }
}

#[test]
fn hostile_files_that_parse_fail_at_load_with_a_named_error() {
    let Some(e) = load_error("op_unknown.pte") else { return };
    assert!(e.to_string().contains("aten.frobnicate.default"), "{e}");
    let Some(e) = load_error("op_arg_wrong_kind.pte") else { return };
    assert!(e.to_string().contains("aten.linear.default"), "{e}");
    let cause = std::error::Error::source(&e).map(ToString::to_string).unwrap_or_default();
    assert!(cause.contains("weight") && cause.contains("expected Tensor, found Int"), "{cause}");
    let Some(e) = load_error("constant_key_missing.pte") else { return };
    let text = e.to_string();
    assert!(text.contains("constant") && text.contains("missing") || text.contains("not found"), "{text}");
}
