//! `etwgpu.add_select_rms_norm`, a residual add, the rows of one index
//! along a dim of its sum and their RMS norm (fused by the graph's fusion
//! pass: a decoder's last residual add, its last token and the final norm):
//! per output row `r` of `n`, with source row `s = row0 + r`,
//! `v = a[s] + b[s]` (rounded to the dtype, as the add's output is), then
//! `out[r] = v / sqrt(mean(v^2) + eps) * weight`. Only the selected rows of
//! `a` and `b` are read and only the normed rows written: the sum and the
//! selected rows are never stored. One workgroup per output row, as
//! `add_rms_norm.wgsl`; f32 math.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 256u;

struct Params {
    /// Output rows.
    rows: u32,
    /// Elements a row.
    n: u32,
    eps: f32,
    /// The source row (of `a` and `b`) of output row 0.
    row0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<Elem>;
@group(0) @binding(2) var<storage, read> b: array<Elem>;
@group(0) @binding(3) var<storage, read> weight: array<Elem>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

// include: wg_sum.wgsl
// include: rms_norm_row.wgsl

/// `a + b` at element `j` of the row at `base`, rounded to the dtype, 0
/// past the row (`rms_norm_row.wgsl`; the sum is not stored, so a long row
/// adds its elements again when it scales them).
fn row_at(base: u32, j: u32) -> f32 {
    let i = base + min(j, p.n - 1u);
    return select(0.0, f32(Elem(f32(a[i]) + f32(b[i]))), j < p.n);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let r = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if r >= p.rows {
        return;
    }
    norm_row(lid, (p.row0 + r) * p.n, r * p.n);
}
