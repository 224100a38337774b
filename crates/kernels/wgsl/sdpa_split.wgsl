//! Split-KV ("FlashDecoding") attention over a KV cache, first pass: the
//! partial softmax of one chunk of the context, for a few query rows
//! (decode). Layout `[1, seq, heads, D]` everywhere; head dims a multiple
//! of 4, at most 256. `sdpa_split_combine.wgsl` merges the partials.
//!
//! The split plan (`n_splits`, `chunk`) comes from the live context
//! (`common/split_plan.wgsl`); the grid's y is sized for the longest one
//! and workgroups past `n_splits` return.
//!
//! Workgroup `(x, y)` takes split `y`, keys `[y * chunk, min(start_pos +
//! seq, (y + 1) * chunk))`, and up to `MAXQ` query vectors (query row, head)
//! that share one kv head: the `seq * group` vectors of kv head `g` (row
//! major over (row, head of the group)) go `MAXQ` per workgroup, so each
//! key and value is read once for all of them. Row `i` sees keys
//! `0..=start_pos + i`. Keys go `TILE` at a time: each invocation scores one
//! key against every query vector (`vec4` dot products, the queries in
//! workgroup memory), each vector's max and sum meet in one `LANES`-wide
//! tree of `(max, sum)` pairs (all vectors at once), and the running
//! output is rescaled by
//! `exp(m_old - m_new)`. For the values, invocation `t` owns `vec4` `t %
//! (D / 4)` of every `WG / (D / 4)`-th key of the tile, so neighbouring
//! invocations read neighbouring dims; the key groups are summed at the
//! end. Each (row, head, split) writes one partial to `part`: `vec4(m, l,
//! 0, 0)` (running max, sum of `exp(s - m)`) then the unnormalized output,
//! `D / 4` `vec4`s, at partial `(row * heads + head) * n_splits + split`.
//! f32 math; the caches are read through `KvElem` (float16 under f32
//! activations in `f32_kvf16`). Keys are loaded eight `vec4`s at a time and
//! values four before any is used, and the loops over query vectors have
//! a constant trip count, so the per-vector sums stay in registers.
//!
//! The call's new keys and values (`k_new`, `v_new`, rows `start_pos..
//! start_pos + seq`) are written into the caches here, not by a dispatch
//! before: each workgroup stores the new rows its split covers (rounded to
//! `KvElem`) and reads them back from the caches after a storage barrier,
//! like every other row (no workgroup reads a row another split writes).
//! Everything but the parameters, the bindings and how the query and the
//! new keys are read is `common/sdpa_split_body.wgsl`'s.
//!
//! Bounds: (`common/sdpa_split_body.wgsl`) `qs` by `e < nq * D / 4` and
//! `jj * D / 4 + d`, below `MAXQ * D / 4 <= 256` as the head dim is at most
//! 256 (`sdpa_with_kv_cache_into` in `ops/llm.rs` takes the split kernels
//! only then); `sc` by `jj * TILE` plus an index below `TILE`; `red` by
//! `lid` and `lid + stride` within a `LANES` block; `sums` by `g * D / 4 +
//! lid < WG`; the per-vector state is named values (no arrays).
// variants: f32 f16 f32_kvf16
// bounds: host-checked

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup (`common/sdpa_split_body.wgsl`).
const WG: u32 = 256u;

// include: split_plan.wgsl
// include: sdpa_split_decl.wgsl
// include: sdpa_split_body.wgsl
