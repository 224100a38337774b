//! Decode route of `etwgpu.sdpa_rope_linear_q4gsw` at short caches: the
//! whole attention of the one query row computed inside the 4-bit GEMV
//! that reads its output (the O projection), one dispatch where the split
//! route takes two (`sdpa_split_rope.wgsl`, then `q4_gemv_attn.wgsl`).
//! Every workgroup needs the whole attention output (each output column
//! dots all of it), so every workgroup computes it: at the short caches
//! the host routes here (`GEMV_ATTN_MAX_CACHE` elements a cache at most),
//! the keys and values come from L2, and recomputing costs less than the
//! dispatch and the partials' round trip it saves.
//!
//! The attention: the query and the call's new key rotated as they are
//! loaded (`et_vk.apply_rotary_emb`, as `sdpa_split_rope.wgsl` rotates
//! them, each result rounded to `Elem`, the key then to the cache's type);
//! every workgroup stores the new key and value into the caches at
//! `start_pos` (the same values: which store lands last does not matter)
//! and reads them back from there like every other key. Then
//! the keys `0 ..= start_pos` in tiles of `SC / n_heads`, online softmax
//! per head:
//! - each invocation scores one (kv head, key) pair against the (at most
//!   `MAXG`) query heads that share that kv head, eight `vec4`s of the key
//!   in flight; the key cache is bound as 16-byte words, so a float16
//!   cache gives two `vec4`s a load (where `head_dim / 4` is even; one
//!   otherwise);
//! - sixteen invocations per head take the tile's max and sum in a tree;
//! - each invocation accumulates one `vec4` of one kv head's values for
//!   its query heads over one key group of the tile, eight loads in
//!   flight at keys clamped into the tile (no remainder loop).
//! At the end the key groups are summed, divided by the softmax sum and
//! rounded to `Elem` (as the split combine stores the output) into `x`,
//! which held the rotated query until then. Then, as `q4_gemv.wgsl` with
//! one row,
//! `out[n] = sum_k x[k] * (nibble(n, k) - 8) * scales[k / group, n] + bias[n]`.
//!
//! The host routes here only for one query row, at most `MAXG` query heads
//! per kv head, at most `MAX_HEADS` heads, `n_heads * head_dim / 4 <= XS`,
//! `n_kv_heads * head_dim / 4 <= NS`, on devices that allow its 11 storage
//! buffers and its workgroup memory (`DeviceCaps::gemv_attention`); see
//! `gemv_attends` in `ops/llm/split_kv.rs`.
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

// The attention's bounds, workgroup memory and functions are in
// `gemv_sdpa_attend.wgsl` (shared with `linear_gemv_sdpa.wgsl`).

/// Invocations per workgroup.
const WG: u32 = 256u;

struct Params {
    /// The GEMV's (`q4_gemv.wgsl`): rows of x (1 here).
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (`n_heads * head_dim`, a multiple of 32).
    k: u32,
    /// Row length of the scales (and bias): N padded.
    n_pad: u32,
    /// Inputs per scale group (a multiple of 32).
    group_size: u32,
    has_bias: u32,
    /// Columns per workgroup: 8, 16 or 32.
    cols: u32,
    /// Bit 0: the weights are word-major, else row-major.
    w_layout: u32,
    /// The attention's, laid out as `sdpa_split_rope.wgsl`'s uniforms (the
    /// host appends that dispatch's words): query rows (1 here).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Key/value heads.
    n_kv_heads: u32,
    /// Head dim (a multiple of 4).
    head_dim: u32,
    /// Position of the query row (its key is the cache's row `start_pos`).
    start_pos: u32,
    /// Softmax scale.
    scale: f32,
    /// The split plan's words and padding (unused here).
    _split0: u32,
    _split1: u32,
    _split2: u32,
    _split3: u32,
    _pad0: u32,
    _pad1: u32,
    /// The tables' row of the query's token.
    table_row: u32,
    _pad2: u32,
    _pad3: u32,
    _pad4: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(5) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(6) var<storage, read> weights: array<vec4<u32>>;
@group(0) @binding(7) var<storage, read> scales: array<Elem>;
@group(0) @binding(8) var<storage, read> bias: array<Elem>;
@group(0) @binding(9) var<storage, read_write> k_cache: array<vec4<u32>>;
@group(0) @binding(10) var<storage, read_write> v_cache: array<vec4<KvElem>>;
@group(0) @binding(11) var<storage, read_write> out: array<Elem>;

// include: q4_dot.wgsl
// include: q4_gemv_columns.wgsl
// include: rope4.wgsl
// include: gemv_sdpa_attend.wgsl

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    // The first two words and their scales, in flight through the prologue.
    let c = column_start(lid, wid, groups);
    attend(lid);
    column_finish(lid, c, p.m);
}
