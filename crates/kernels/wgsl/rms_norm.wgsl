//! RMS norm over the last `n` elements of each row (`et_vk.rms_norm`):
//! `out = x / sqrt(mean(x^2) + eps) * weight`. One workgroup per row: its
//! invocations sum the squares of a strided share of the row, the partial
//! sums meet in shared memory, then each scales its share. f32 math.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reduction assumes a power of two.
const WG: u32 = 256u;

struct Params {
    rows: u32,
    n: u32,
    eps: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> weight: array<Elem>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

// include: wg_sum.wgsl
// include: rms_norm_row.wgsl

/// Element `j` of the row at `base`, 0 past the row (`rms_norm_row.wgsl`).
fn row_at(base: u32, j: u32) -> f32 {
    return select(0.0, f32(x[base + min(j, p.n - 1u)]), j < p.n);
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
    norm_row(lid, r * p.n, r * p.n);
}
