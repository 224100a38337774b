//! Causal attention over a float16 KV cache for prompts on cooperative
//! matrices (tensor cores): the route `sdpa_with_kv_cache` takes for
//! prompts where the device has them (`etwgpu_kernels::ops::attention_coop`),
//! else `sdpa_prefill.wgsl`. Layout `[1, seq, heads, D]` everywhere, head
//! dims a multiple of 4 up to 128; same parameters as `sdpa_prefill.wgsl`;
//! the caches were updated by `kv_cache_update.wgsl` first. Operands are
//! f16 on the matrix units (float32 queries are rounded as they are
//! staged, the probabilities as they are stored), accumulation f32.
//!
//! One workgroup of 8 subgroups of 32 per (block of `BQ` = 64 query rows,
//! query head), heaviest blocks first; subgroup `sg` takes row group
//! `g = sg % 4` (rows `16 g .. 16 g + 15` of the block) and half
//! `hs = sg / 4` (score columns and output dims `32 hs .. 32 hs + 31` of
//! each 64). Query row `i` attends to cache rows `0..=start_pos + i` of
//! kv head `h / group`, so the block walks key tiles of `BK` = 64 only up
//! to the last key its last row needs: tiles above the diagonal are never
//! loaded; the per-key mask (`key <= the row's last`) covers the diagonal
//! tiles and the end of the keys. Rows past the end of the prompt read
//! zero queries and are not written.
//!
//! The block's queries are staged once and held as A fragments (`qa0..7`,
//! 64 dims each half; both subgroups of a row group hold its rows). Per
//! key tile: K is staged (f16 rows, zeros past the keys and the head dim;
//! its first 64 dims were loaded during the last tile's `P V`, the
//! values' first 64 dims are loaded with it and stored after the scores),
//! each subgroup computes its 16 x 32 scores `S = Q K^T` (keys `32 hs ..`)
//! one 16 x 16 fragment at a time and stores them (f32) to its part of
//! `ss`; V is staged transposed (`V^T`, a row of keys per dim) into K's
//! place; each row's four invocations (`lid / 4`, quarter `qt = lid % 4`,
//! interleaved `vec4` columns `16 j + 4 qt`) read their 16 scores once,
//! as 16-byte runs, into registers, take the tile's max of the scaled
//! scores (log2 units, combined through `red`), then write
//! `P = exp2(s - m_ref)` as `vec4<f16>` to `ps` and add it to their part
//! of the row's sum; then `O += P V` on the matrix units (all 64 keys of
//! the subgroup's rows), into accumulators `o0..1` (dims `32 hs ..`) and
//! `o2..3` (dims `64 + 32 hs ..`, head dims past 64), 16 x 16 f32 each,
//! that stay in registers across the tiles.
//!
//! Every fragment moves as in `q4_gemm_coop.wgsl`, the forms measured
//! right on the H200: A operands row-major (`coopLoadT`) and B operands
//! column-major (`coopLoad`) from `vec4<f16>` arrays, accumulators through
//! `f32` arrays (`coopStoreT` / `coopLoadT`).
//!
//! Fragments are opaque, so the online-softmax rescale of `O` is lazy: a
//! row keeps its reference max `m_ref` until a tile's max passes it by
//! more than `TAU` (so every `P <= 2^TAU`, well inside f16); only then
//! (decided for the whole workgroup, `workgroupUniformLoad`) do the
//! accumulators pass through `ss` (each subgroup its rows and 32 columns)
//! to be scaled by `exp2(m_old - m_new)` per row and reloaded. That
//! happens at the first tiles and where a later key scores far above the
//! earlier ones; the sums are scaled alike. At the end each accumulator
//! passes through `ss` once more, is divided by the row's sum (its four
//! parts) and written out as `Elem`.
//!
//! Measured on the H200 at the Llama-3.2-1B shape (32 query heads over 8,
//! D 64, 2,048 rows; `attention_probe time`, run am): 1.26 ms a dispatch
//! when each invocation read its scores from `ss` in two strided scalar
//! passes, 0.57 ms with them read once into registers, 0.43 ms with 8
//! subgroups a workgroup instead of 4 (the kernel waits on latency:
//! leaving out either product saved only ~12%).
//!
//! Workgroup memory: 46,096 bytes (the route needs 48 KiB, as every
//! cooperative-matrix kernel). Assumes subgroups of 32 invocations.
// variants: f16 f32_kvf16

enable f16;
enable wgpu_cooperative_matrix;

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup: 8 subgroups of 32.
const WG: u32 = 256u;
/// Query rows per block (16 per row group of two subgroups).
const BQ: u32 = 64u;
/// Keys per tile.
const BK: u32 = 64u;
/// Row stride of a staged query / key / value row, in `vec4<f16>`: 128
/// dims (the largest head dim) plus 8 halves of padding.
const KVS4: u32 = 34u;
/// Row stride of the score rows (f32): BK plus 4 (rows 16-byte aligned).
const LDS: u32 = BK + 4u;
/// Row stride of the probability rows, in `vec4<f16>`: BK plus 8 halves.
const LDP4: u32 = (BK + 8u) / 4u;
/// Row stride of a staged `V^T` row (one dim, its BK keys), in
/// `vec4<f16>`: BK plus 8 halves.
const LDV4: u32 = (BK + 8u) / 4u;
/// `vec4<f16>`s of `kv`: the larger of a query / key block (`BQ` rows of
/// `KVS4`) and a `V^T` tile (128 dims of `LDV4`).
const KV_LEN: u32 = max(BQ * KVS4, 128u * LDV4);
/// How far (log2 units) a tile's max may pass a row's reference max
/// before the accumulators are rescaled: probabilities stay <= 2^TAU.
const TAU: f32 = 8.0;
const LOG2E: f32 = 1.4426950408889634;
/// Score of a masked key, and the reference max of a row before its first
/// key.
const NEG: f32 = -3.402823e38;

struct Params {
    /// Tokens in the chunk (`S`).
    seq: u32,
    /// Query heads.
    n_heads: u32,
    /// Key/value heads.
    n_kv_heads: u32,
    /// Head dim (a multiple of 4, at most 128).
    head_dim: u32,
    /// Position of the first new token.
    start_pos: u32,
    /// Softmax scale.
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<Elem>>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<KvElem>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<KvElem>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<Elem>>;

/// The staged query block (at the start), then each key tile (row-major,
/// `KVS4` per row), then the same tile's values transposed (`LDV4` per
/// dim).
var<workgroup> kv: array<vec4<f16>, KV_LEN>;
/// Scores `[BQ, LDS]` (each subgroup its 16 rows, 32 columns); also the
/// accumulators on their way to a rescale or out.
var<workgroup> ss: array<f32, BQ * LDS>;
/// Probabilities `[BQ, LDP4]`, row-major.
var<workgroup> ps: array<vec4<f16>, BQ * LDP4>;
/// Per-invocation partial (row max, then row sum), read by the row's four.
var<workgroup> red: array<f32, WG>;
/// `.x` is set when some row needs a rescale this tile. A `vec4`, not a
/// `u32`: every workgroup variable of a cooperative-matrix kernel must be
/// a multiple of 16 bytes. The H200's driver does not place them in the
/// order declared, and a 4-byte variable put before the arrays left
/// them 8-byte aligned, where the matrix units move rows 16 bytes at a
/// time: every result was wrong there (runs ad to ak) while the plain
/// emulation passed (run al found it; `tests::coop_workgroup_variables_are_16_byte_multiples`
/// keeps it so).
var<workgroup> flag: vec4<u32>;

/// Where unit `i` (0..1024: row `i / 16`, `vec4` column `i % 16`) of the
/// 64-dim chunk `ch` of a staged row block goes in `kv`.
fn kv_at(ch: u32, i: u32) -> u32 {
    return (i / 16u) * KVS4 + ch * 16u + i % 16u;
}

/// Unit `i` of chunk `ch` of the key tile at `k0` of kv head `kvh`: zeros
/// past `n_keys` and past the head dim.
fn load_k(k0: u32, kvh: u32, n_keys: u32, ch: u32, i: u32) -> vec4<f16> {
    let key = k0 + i / 16u;
    let c = ch * 16u + i % 16u;
    let d4 = p.head_dim / 4u;
    if key >= n_keys || c >= d4 {
        return vec4<f16>();
    }
    return vec4<f16>(k_cache[(key * p.n_kv_heads + kvh) * d4 + c]);
}

/// Four keys of the values: unit `u` (0..256) of chunk `ch` is dims
/// `4 (u % 4 + 4 (u / 64)) ..` (of the chunk's 64) of keys
/// `k0 + 4 ((u / 4) % 16) ..`: so a subgroup's transposed stores
/// (`store_vt`) cover 8 key columns of 4 dim rows, two wavefronts of the
/// banks (a mapping with 16 lanes on one dim row put them on one or two
/// banks), and each global load still fills whole 32-byte sectors.
struct V4 {
    k0: vec4<f16>,
    k1: vec4<f16>,
    k2: vec4<f16>,
    k3: vec4<f16>,
}

/// Unit `u` of chunk `ch` of the value tile at `k0` of kv head `kvh`:
/// zeros past `n_keys` and past the head dim.
fn load_v(k0: u32, kvh: u32, n_keys: u32, ch: u32, u: u32) -> V4 {
    let key = k0 + 4u * ((u / 4u) % 16u);
    let c = ch * 16u + u % 4u + 4u * (u / 64u);
    return V4(v_at(key, kvh, n_keys, c), v_at(key + 1u, kvh, n_keys, c), v_at(key + 2u, kvh, n_keys, c),
        v_at(key + 3u, kvh, n_keys, c));
}

/// `vec4` column `c` of value row `key` of kv head `kvh`: zeros past
/// `n_keys` and past the head dim.
fn v_at(key: u32, kvh: u32, n_keys: u32, c: u32) -> vec4<f16> {
    let d4 = p.head_dim / 4u;
    if key >= n_keys || c >= d4 {
        return vec4<f16>();
    }
    return vec4<f16>(v_cache[(key * p.n_kv_heads + kvh) * d4 + c]);
}

/// Stores unit `u` of chunk `ch` transposed: dim `64 ch + 4 (u % 4 + 4 (u
/// / 64)) + i` is row `.. + i` of `V^T`, its four keys at `vec4` column
/// `(u / 4) % 16`.
fn store_vt(ch: u32, u: u32, v: V4) {
    let at = (ch * 64u + 4u * (u % 4u + 4u * (u / 64u))) * LDV4 + (u / 4u) % 16u;
    kv[at] = vec4<f16>(v.k0.x, v.k1.x, v.k2.x, v.k3.x);
    kv[at + LDV4] = vec4<f16>(v.k0.y, v.k1.y, v.k2.y, v.k3.y);
    kv[at + 2u * LDV4] = vec4<f16>(v.k0.z, v.k1.z, v.k2.z, v.k3.z);
    kv[at + 3u * LDV4] = vec4<f16>(v.k0.w, v.k1.w, v.k2.w, v.k3.w);
}

/// Stages chunk `ch` (64 dims) of the value tile at `k0` (the second:
/// the first is loaded ahead, in `main`).
fn stage_v(k0: u32, kvh: u32, n_keys: u32, ch: u32, lid: u32) {
    store_vt(ch, lid, load_v(k0, kvh, n_keys, ch, lid));
}

/// Stages chunk `ch` (64 dims) of the key tile at `k0` (the second: the
/// first is loaded a tile ahead, in `main`).
fn stage_k(k0: u32, kvh: u32, n_keys: u32, ch: u32, lid: u32) {
    let kk0 = load_k(k0, kvh, n_keys, ch, lid + 0u * WG);
    let k1 = load_k(k0, kvh, n_keys, ch, lid + 1u * WG);
    let k2 = load_k(k0, kvh, n_keys, ch, lid + 2u * WG);
    let k3 = load_k(k0, kvh, n_keys, ch, lid + 3u * WG);
    kv[kv_at(ch, lid + 0u * WG)] = kk0;
    kv[kv_at(ch, lid + 1u * WG)] = k1;
    kv[kv_at(ch, lid + 2u * WG)] = k2;
    kv[kv_at(ch, lid + 3u * WG)] = k3;
}

/// Scales this invocation's quarter of the 64 columns of its row in `ss`
/// (row `at`, columns `4 j + qt`) by `alpha`.
fn scale_row(at: u32, qt: u32, alpha: f32) {
    for (var j = 0u; j < 16u; j++) {
        ss[at + 4u * j + qt] *= alpha;
    }
}

/// Writes 16 dims (`vec4` columns `4 j + qt` of the 64 held in `ss` from
/// dim `d0`) of output row `i0 + r`, divided by its sum; rows past the
/// prompt and dims past the head dim are not written.
fn emit(at: u32, i0: u32, r: u32, rows: u32, h: u32, d0: u32, qt: u32, inv: f32) {
    let d4 = p.head_dim / 4u;
    if r >= rows {
        return;
    }
    let base = ((i0 + r) * p.n_heads + h) * d4;
    for (var j = 0u; j < 4u; j++) {
        let c = j * 16u + qt * 4u;
        let c4 = (d0 + c) / 4u;
        if c4 < d4 {
            let v = vec4<f32>(ss[at + c], ss[at + c + 1u], ss[at + c + 2u], ss[at + c + 3u]);
            out[base + c4] = vec4<Elem>(v * inv);
        }
    }
}

/// The max of `m` and the scaled scores `s * cs` of columns `col0 ..
/// col0 + 3` that are at most `last`.
fn masked_max(m: f32, s: vec4<f32>, col0: u32, last: u32, cs: f32) -> f32 {
    var x = m;
    x = select(x, max(x, s.x * cs), col0 <= last);
    x = select(x, max(x, s.y * cs), col0 + 1u <= last);
    x = select(x, max(x, s.z * cs), col0 + 2u <= last);
    x = select(x, max(x, s.w * cs), col0 + 3u <= last);
    return x;
}

/// `exp2(s * cs - m)` as f16 for columns `col0 .. col0 + 3` at most
/// `last`, zero past it.
fn masked_p(s: vec4<f32>, col0: u32, last: u32, cs: f32, m: f32) -> vec4<f16> {
    let e = vec4<f16>(exp2(min(s * cs - m, vec4<f32>(15.0))));
    let keep = vec4<bool>(col0 <= last, col0 + 1u <= last, col0 + 2u <= last, col0 + 3u <= last);
    return select(vec4<f16>(), e, keep);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let n_blocks = (p.seq + BQ - 1u) / BQ;
    let idx = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if idx >= n_blocks * p.n_heads {
        return;
    }
    let h = idx / n_blocks;
    // The last blocks see the most keys: they go first.
    let i0 = (n_blocks - 1u - idx % n_blocks) * BQ;
    let rows = min(BQ, p.seq - i0);
    let kvh = h / (p.n_heads / p.n_kv_heads);
    let d4 = p.head_dim / 4u;
    // Head dims past 64 take the second half of the fragments.
    let wide = p.head_dim > 64u;
    // Keys of the block: row `i0 + r` sees keys `0..=start_pos + i0 + r`.
    let n_keys = p.start_pos + i0 + rows;

    let sg = lid / 32u;
    let lane = lid % 32u;
    // The subgroup's row group (rows `16 g ..`) and half (score columns
    // and output dims `32 hs ..` of each 64).
    let g = sg % 4u;
    let hs = sg / 4u;
    // This invocation's row of the block, its quarter of the row's
    // columns (interleaved: `vec4` runs at `16 j + 4 qt`) and the row's
    // first invocation (its entry in `red`).
    let r = lid / 4u;
    let qt = lid % 4u;
    let rq = 4u * r;
    let row_last = select(n_keys - 1u, p.start_pos + i0 + r, r < rows);
    // The row group's rows in `kv`, `ss` and `ps`; the subgroup's first
    // column of them in `ss`; this row in `ss`.
    let qrow = g * 16u * KVS4;
    let srow = g * 16u * LDS;
    let prow = g * 16u * LDP4;
    let scol = srow + 32u * hs;
    let at = r * LDS;
    let cs = p.scale * LOG2E;

    // The query block (zeros past the rows and the head dim), rounded to
    // f16; and a zero fragment in the subgroup's first 16 x 16 of `ss`.
    for (var e = lid; e < BQ * 32u; e += WG) {
        let row = e / 32u;
        let c = e % 32u;
        var x = vec4<f16>();
        if row < rows && c < d4 {
            x = vec4<f16>(q[((i0 + row) * p.n_heads + h) * d4 + c]);
        }
        kv[row * KVS4 + c] = x;
    }
    for (var e = lane; e < 256u; e += 32u) {
        ss[scol + (e / 16u) * LDS + e % 16u] = 0.0;
    }
    workgroupBarrier();
    let qa0 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qrow + 0u], KVS4);
    let qa1 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qrow + 4u], KVS4);
    let qa2 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qrow + 8u], KVS4);
    let qa3 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qrow + 12u], KVS4);
    let qa4 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qrow + 16u], KVS4);
    let qa5 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qrow + 20u], KVS4);
    let qa6 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qrow + 24u], KVS4);
    let qa7 = coopLoadT<coop_mat16x16<f16, A>>(&kv[qrow + 28u], KVS4);
    let zc = coopLoadT<coop_mat16x16<f32, C>>(&ss[scol], LDS);
    var o0 = zc;
    var o1 = zc;
    var o2 = zc;
    var o3 = zc;

    // The first 64 dims of the next key tile, loaded a tile ahead (during
    // the last tile's P V) and stored at the top of the loop.
    var kn0 = load_k(0u, kvh, n_keys, 0u, lid + 0u * WG);
    var kn1 = load_k(0u, kvh, n_keys, 0u, lid + 1u * WG);
    var kn2 = load_k(0u, kvh, n_keys, 0u, lid + 2u * WG);
    var kn3 = load_k(0u, kvh, n_keys, 0u, lid + 3u * WG);
    var m_ref = NEG;
    var l_part = 0.0;
    for (var k0 = 0u; k0 < n_keys; k0 += BK) {
        // The last tile's values, probabilities and scores are consumed.
        workgroupBarrier();
        // The values' first 64 dims are loaded now and stored after the
        // scores, so their latency hides behind the scores' multiplies.
        let va = load_v(k0, kvh, n_keys, 0u, lid);
        kv[kv_at(0u, lid + 0u * WG)] = kn0;
        kv[kv_at(0u, lid + 1u * WG)] = kn1;
        kv[kv_at(0u, lid + 2u * WG)] = kn2;
        kv[kv_at(0u, lid + 3u * WG)] = kn3;
        if wide {
            stage_k(k0, kvh, n_keys, 1u, lid);
        }
        workgroupBarrier();
        // S = Q K^T for the subgroup's keys `32 hs ..`, 16 at a time:
        // B(d, key) = K[key, d], column-major.
        for (var jj = 0u; jj < 2u; jj++) {
            let j = 2u * hs + jj;
            let kb = j * 16u * KVS4;
            var s = zc;
            s = coopMultiplyAdd(qa0, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + 0u], KVS4), s);
            s = coopMultiplyAdd(qa1, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + 4u], KVS4), s);
            s = coopMultiplyAdd(qa2, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + 8u], KVS4), s);
            s = coopMultiplyAdd(qa3, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + 12u], KVS4), s);
            if wide {
                s = coopMultiplyAdd(qa4, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + 16u], KVS4), s);
                s = coopMultiplyAdd(qa5, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + 20u], KVS4), s);
                s = coopMultiplyAdd(qa6, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + 24u], KVS4), s);
                s = coopMultiplyAdd(qa7, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + 28u], KVS4), s);
            }
            coopStoreT(s, &ss[srow + j * 16u], LDS);
        }
        // The keys are consumed and the scores visible: values into their place.
        workgroupBarrier();
        // This invocation's 16 scores (`vec4` runs at columns `16 j +
        // 4 qt`), read once, right after their barrier.
        let sb = at + 4u * qt;
        let sv0 = vec4<f32>(ss[sb + 0u], ss[sb + 1u], ss[sb + 2u], ss[sb + 3u]);
        let sv1 = vec4<f32>(ss[sb + 16u], ss[sb + 17u], ss[sb + 18u], ss[sb + 19u]);
        let sv2 = vec4<f32>(ss[sb + 32u], ss[sb + 33u], ss[sb + 34u], ss[sb + 35u]);
        let sv3 = vec4<f32>(ss[sb + 48u], ss[sb + 49u], ss[sb + 50u], ss[sb + 51u]);
        store_vt(0u, lid, va);
        if wide {
            stage_v(k0, kvh, n_keys, 1u, lid);
        }
        // The tile's max of the row (log2 units), over its unmasked keys:
        // this quarter's, then the row's four through `red`.
        var pm = NEG;
        pm = masked_max(pm, sv0, k0 + 0u + 4u * qt, row_last, cs);
        pm = masked_max(pm, sv1, k0 + 16u + 4u * qt, row_last, cs);
        pm = masked_max(pm, sv2, k0 + 32u + 4u * qt, row_last, cs);
        pm = masked_max(pm, sv3, k0 + 48u + 4u * qt, row_last, cs);
        red[lid] = pm;
        workgroupBarrier();
        // The same order in all four: they agree on `mt` exactly.
        let mt = max(max(red[rq], red[rq + 1u]), max(red[rq + 2u], red[rq + 3u]));
        if mt > m_ref + TAU {
            flag.x = 1u;
        }
        let rescale = workgroupUniformLoad(&flag).x != 0u;
        var alpha = 1.0;
        if rescale {
            let m_new = max(m_ref, mt);
            alpha = exp2(m_ref - m_new);
            m_ref = m_new;
            l_part *= alpha;
        }
        // P = exp2(s - m_ref), rounded to f16 as the matrix units take it;
        // this invocation's `vec4` columns `4 j + qt`.
        var l_tile = 0.0;
        let p0 = masked_p(sv0, k0 + 0u + 4u * qt, row_last, cs, m_ref);
        l_tile += f32(p0.x) + f32(p0.y) + f32(p0.z) + f32(p0.w);
        ps[r * LDP4 + 0u + qt] = p0;
        let p1 = masked_p(sv1, k0 + 16u + 4u * qt, row_last, cs, m_ref);
        l_tile += f32(p1.x) + f32(p1.y) + f32(p1.z) + f32(p1.w);
        ps[r * LDP4 + 4u + qt] = p1;
        let p2 = masked_p(sv2, k0 + 32u + 4u * qt, row_last, cs, m_ref);
        l_tile += f32(p2.x) + f32(p2.y) + f32(p2.z) + f32(p2.w);
        ps[r * LDP4 + 8u + qt] = p2;
        let p3 = masked_p(sv3, k0 + 48u + 4u * qt, row_last, cs, m_ref);
        l_tile += f32(p3.x) + f32(p3.y) + f32(p3.z) + f32(p3.w);
        ps[r * LDP4 + 12u + qt] = p3;
        l_part += l_tile;
        // Probabilities and values visible; every score and the flag read.
        workgroupBarrier();
        if lid == 0u {
            flag.x = 0u;
        }
        // (At the first tile too, where the accumulators are still zero:
        // naga's uniformity analysis takes the loop's counter for
        // non-uniform, so the condition cannot name it.) Each subgroup
        // its rows and 32 columns of `ss`; each row's four invocations
        // scale its 64.
        if rescale {
            coopStoreT(o0, &ss[scol + 0u], LDS);
            coopStoreT(o1, &ss[scol + 16u], LDS);
            workgroupBarrier();
            scale_row(at, qt, alpha);
            workgroupBarrier();
            o0 = coopLoadT<coop_mat16x16<f32, C>>(&ss[scol + 0u], LDS);
            o1 = coopLoadT<coop_mat16x16<f32, C>>(&ss[scol + 16u], LDS);
            if wide {
                workgroupBarrier();
                coopStoreT(o2, &ss[scol + 0u], LDS);
                coopStoreT(o3, &ss[scol + 16u], LDS);
                workgroupBarrier();
                scale_row(at, qt, alpha);
                workgroupBarrier();
                o2 = coopLoadT<coop_mat16x16<f32, C>>(&ss[scol + 0u], LDS);
                o3 = coopLoadT<coop_mat16x16<f32, C>>(&ss[scol + 16u], LDS);
            }
        }
        // The next key tile's first 64 dims (zeros past the keys).
        kn0 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 0u * WG);
        kn1 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 1u * WG);
        kn2 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 2u * WG);
        kn3 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 3u * WG);
        // O += P V for the subgroup's dims, 16 keys a step:
        // B(key, d) = V^T[d, key], column-major.
        for (var kk = 0u; kk < 4u; kk++) {
            let pa = coopLoadT<coop_mat16x16<f16, A>>(&ps[prow + kk * 4u], LDP4);
            let vb = 32u * hs * LDV4 + kk * 4u;
            o0 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 0u * LDV4], LDV4), o0);
            o1 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 16u * LDV4], LDV4), o1);
            if wide {
                o2 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 64u * LDV4], LDV4), o2);
                o3 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 80u * LDV4], LDV4), o3);
            }
        }
    }

    // The row's sum from its four parts; then O / sum, 64 dims at a time.
    workgroupBarrier();
    red[lid] = l_part;
    coopStoreT(o0, &ss[scol + 0u], LDS);
    coopStoreT(o1, &ss[scol + 16u], LDS);
    workgroupBarrier();
    let inv = 1.0 / ((red[rq] + red[rq + 1u]) + (red[rq + 2u] + red[rq + 3u]));
    emit(at, i0, r, rows, h, 0u, qt, inv);
    if wide {
        workgroupBarrier();
        coopStoreT(o2, &ss[scol + 0u], LDS);
        coopStoreT(o3, &ss[scol + 16u], LDS);
        workgroupBarrier();
        emit(at, i0, r, rows, h, 64u, qt, inv);
    }
}
