//! The workgroup shape of the streaming float GEMVs (`linear_gemv.wgsl`,
//! `gemv_qkv_vec4.wgsl`, `gemv_swiglu_vec4.wgsl`): `COLS` output columns of
//! `LANES` invocations each, at most `MAX_ROWS` rows of x. The host sizes
//! their grids by `COLS` (`LINEAR_GEMV_COLS` in `ops/matmul.rs`).

/// Invocations per column.
const LANES: u32 = 32u;
/// Columns per workgroup (`LANES * COLS` = 256 invocations).
const COLS: u32 = 8u;
/// Most rows of x.
const MAX_ROWS: u32 = 4u;
