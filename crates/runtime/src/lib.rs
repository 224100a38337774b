//! Runs etwgpu execution plans on a wgpu device (filled in by the execution work).
