//! 2-D max pooling over the last two dims of a tensor seen as
//! `[planes, H, W]`, values only (`aten.max_pool2d`; `max_pool2d.wgsl` also
//! writes the indices): one invocation per output element, the same
//! parameters as `max_pool2d.wgsl`. NaN wins; padding never wins.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 64).
override WG: u32 = 64u;

// include: max_pool.wgsl

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let c = out_coords(i);
    out[i] = Elem(window_max(c.x, c.y, c.z).value);
}
