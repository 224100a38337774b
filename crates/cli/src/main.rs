//! The `etwgpu` command-line tool.

fn main() {}
