//! `et_vk.grid_priors`: the anchor points of a `[.., H, W]` feature map,
//! `out[h * W + w] = ((w + offset) * stride, (h + offset) * stride)`, one
//! invocation per point. Reads no tensor.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    n_points: u32,
    w: u32,
    stride: f32,
    offset: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.n_points {
        return;
    }
    out[2u * i] = Elem((f32(i % p.w) + p.offset) * p.stride);
    out[2u * i + 1u] = Elem((f32(i / p.w) + p.offset) * p.stride);
}
