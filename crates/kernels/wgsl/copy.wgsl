//! The bandwidth reference: `dst[i] = src[i]` over 16-byte words, one word
//! per invocation. Not an operator: `etwgpu devices --bandwidth` and the
//! benches time it to know what a memory-bound kernel can reach.
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    /// Number of 16-byte words.
    n_words: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<Elem>>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i < p.n_words {
        dst[i] = src[i];
    }
}
