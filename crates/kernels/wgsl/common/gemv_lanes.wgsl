//! The workgroup shape of the streaming float GEMVs (`linear_gemv.wgsl`,
//! `gemv_qkv_vec4.wgsl`, `gemv_swiglu_vec4.wgsl`): `p.cols` output columns
//! (8, 4 or 2: `gemv_cols` in `ops/matmul.rs`) of `WG / p.cols`
//! invocations each, at most `MAX_ROWS` rows of x. Fewer columns a
//! workgroup give narrow outputs more workgroups, so more loads in flight.

/// Invocations per workgroup.
const WG: u32 = 256u;
/// Most rows of x.
const MAX_ROWS: u32 = 4u;
