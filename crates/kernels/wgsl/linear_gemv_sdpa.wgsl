//! Decode route of `etwgpu.sdpa_rope_linear` (float weights) at short
//! caches: the whole attention of the one query row computed inside the
//! float GEMV that reads its output (the O projection), one dispatch where
//! the split route takes two (`sdpa_split_rope.wgsl`, then
//! `linear_gemv_attn.wgsl`). Every workgroup needs the whole attention
//! output, so every workgroup computes it (`gemv_sdpa_attend.wgsl`, as
//! `q4_gemv_sdpa.wgsl` does before its 4-bit GEMV: the query and the new
//! key rotated as loaded, the new rows stored into the caches, the keys in
//! tiles with an online softmax, the output rounded to `Elem` into `x`);
//! then, as `linear_gemv.wgsl` with one row,
//! `out[n] = sum_k x[k] * w[n, k] + bias[n]`.
//!
//! The host routes here only for one query row, at most `MAXG` query heads
//! per kv head, at most `MAX_HEADS` heads, `n_heads * head_dim / 4 <= XS`,
//! `n_kv_heads * head_dim / 4 <= NS`, on devices that allow its workgroup
//! memory (`DeviceCaps::gemv_attention`); see `gemv_attends` in
//! `ops/llm/split_kv.rs`.
// variants: f32 f16 f32_kvf16

alias Elem = f32;
alias KvElem = Elem;

// include: gemv_lanes.wgsl

struct Params {
    /// The GEMV's (`linear_gemv.wgsl`): rows of x (1 here).
    m: u32,
    /// Output features.
    n: u32,
    /// Input features (`n_heads * head_dim`, a multiple of 4).
    k: u32,
    has_bias: u32,
    /// Output columns a workgroup (8, 4 or 2).
    cols: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
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
    _pad3: u32,
    _pad4: u32,
    /// The tables' row of the query's token.
    table_row: u32,
    _pad5: u32,
    _pad6: u32,
    _pad7: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_new: array<vec4<Elem>>;
@group(0) @binding(3) var<storage, read> v_new: array<vec4<Elem>>;
@group(0) @binding(4) var<storage, read> cos_t: array<Elem>;
@group(0) @binding(5) var<storage, read> sin_t: array<Elem>;
@group(0) @binding(6) var<storage, read> w: array<vec4<Elem>>;
@group(0) @binding(7) var<storage, read> bias: array<Elem>;
@group(0) @binding(8) var<storage, read_write> k_cache: array<vec4<u32>>;
@group(0) @binding(9) var<storage, read_write> v_cache: array<vec4<KvElem>>;
@group(0) @binding(10) var<storage, read_write> out: array<Elem>;

// include: rope4.wgsl
// include: gemv_sdpa_attend.wgsl

/// The attention's output row into `x` (`gemv_sdpa_attend.wgsl`).
fn prologue(lid: u32) {
    attend(lid);
}

fn x_at(i: u32) -> vec4<f32> {
    return x[i];
}

// include: linear_gemv_body.wgsl
