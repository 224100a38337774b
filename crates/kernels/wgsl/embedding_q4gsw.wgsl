//! 4-bit group-wise embedding (`et_vk.embedding_q4gsw`, linear packing):
//! `out[i, d] = (nibble(indices[i], d) - 8) * scales[indices[i], d / group]`.
//!
//! Weights are u8 `[V, E/2]` read as `u32` words, even dims in the low
//! nibble; scales are `[V, G]`. One invocation per output element; an
//! index outside `0..V` gives zeros. The weights and scales may hold only
//! rows `row_start .. row_start + V` of a table split past the binding
//! limit: an index outside them gives zeros too, so the chunks' outputs
//! sum to the whole lookup.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    /// Output elements.
    numel: u32,
    /// Embedding dim.
    dim: u32,
    /// Rows held (the vocabulary size of a whole table).
    vocab: u32,
    /// Bytes per weight row.
    row_bytes: u32,
    /// Scale groups per row.
    n_groups: u32,
    /// Dims per scale group.
    group_size: u32,
    /// The token of the first row held (0 for a whole table).
    row_start: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> weights: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<Elem>;
@group(0) @binding(3) var<storage, read> indices: array<i32>;
@group(0) @binding(4) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = gid.x + gid.y * nwg.x * WG;
    if idx >= p.numel {
        return;
    }
    let i = idx / p.dim;
    let d = idx % p.dim;
    let token = indices[i];
    if token < 0 || u32(token) < p.row_start || u32(token) - p.row_start >= p.vocab {
        out[idx] = Elem(0.0);
        return;
    }
    let t = u32(token) - p.row_start;
    let byte_idx = t * p.row_bytes + d / 2u;
    let byte = (weights[byte_idx / 4u] >> ((byte_idx % 4u) * 8u)) & 0xffu;
    let nibble = (byte >> ((d % 2u) * 4u)) & 0xfu;
    let s = f32(scales[t * p.n_groups + d / p.group_size]);
    out[idx] = Elem(f32(i32(nibble) - 8) * s);
}
