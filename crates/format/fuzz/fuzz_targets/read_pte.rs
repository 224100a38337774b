//! Fuzz target: `Program::from_bytes` on arbitrary bytes must return, never
//! panic, hang or allocate without bound.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = etwgpu_format::Program::from_bytes(data.to_vec());
});
