//! Fuzz target: parsing a delegate blob (VH00 header + VK00 graph) on
//! arbitrary bytes must return, never panic, hang or allocate without bound.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = etwgpu_format::VkGraph::parse(data, 0, &|_| None);
});
