//! Causal attention over a float16 KV cache for prompts on cooperative
//! matrices (tensor cores): the route `sdpa_with_kv_cache` takes for
//! prompts where the device has them (`etwgpu_kernels::ops::attention_coop`),
//! else `sdpa_prefill.wgsl`. Layout `[1, seq, heads, D]` everywhere, head
//! dims a multiple of 4 up to 128; same parameters as `sdpa_prefill.wgsl`;
//! the caches were updated by `kv_cache_update.wgsl` first. Operands are
//! f16 on the matrix units (float32 queries are rounded as they are
//! staged, the probabilities as they are stored), accumulation f32.
//!
//! One workgroup of 4 subgroups of 32 per (block of `BQ` = 64 query rows,
//! query head), heaviest blocks first; subgroup `sg` owns rows `16 sg ..
//! 16 sg + 15` of the block. Query row `i` attends to cache rows
//! `0..=start_pos + i` of kv head `h / group`, so the block walks key
//! tiles of `BK` = 64 only up to the last key its last row needs: tiles
//! above the diagonal are never loaded; the per-key mask (`key <= the
//! row's last`) covers the diagonal tiles and the end of the keys. Rows
//! past the end of the prompt read zero queries and are not written.
//!
//! The block's queries are staged once and held as A fragments (`qa0..7`,
//! 64 dims each half). Per key tile: K is staged (f16 rows, zeros past
//! the keys and the head dim; its first 64 dims were loaded during the
//! last tile's `P V`, the values' first 64 dims are loaded with it and
//! stored after the scores), each subgroup computes its 16 x 64 scores
//! `S = Q K^T` one 16 x 16 fragment at a time and stores them (f32) to
//! its rows of `ss`; V is staged transposed (`V^T`, a row of keys per
//! dim) into K's place; each row's two invocations (`lane / 2`, `vec4`
//! columns interleaved) read their 32 scores once, as eight 16-byte runs,
//! right after the barrier that makes them visible, take the tile's max
//! of the scaled scores (log2 units) from those registers, then write
//! `P = exp2(s - m_ref)` as `vec4<f16>` to `ps` and add it to the row's
//! sum; then `O += P V` on the matrix units, into
//! accumulators `o0..7` (16 x 16 f32 each, 64 dims each half) that stay
//! in registers across the tiles.
//!
//! Every fragment moves as in `q4_gemm_coop.wgsl`, the forms measured
//! right on the H200: A operands row-major (`coopLoadT`) and B operands
//! column-major (`coopLoad`) from `vec4<f16>` arrays, accumulators through
//! `f32` arrays (`coopStoreT` / `coopLoadT`). (The first version staged V
//! row-major for `coopLoadT` as B and P in an `f16` array; on the H200
//! it gave wrong results that a plain-WGSL emulation of the same layouts
//! did not, run ad.)
//!
//! Fragments are opaque, so the online-softmax rescale of `O` is lazy: a
//! row keeps its reference max `m_ref` until a tile's max passes it by
//! more than `TAU` (so every `P <= 2^TAU`, well inside f16); only then
//! (decided for the whole workgroup, `workgroupUniformLoad`) do the
//! accumulators pass through `ss` to be scaled by `exp2(m_old - m_new)`
//! per row and reloaded. That happens at the first tiles and where a later
//! key scores far above the earlier ones; the sums are scaled alike. At
//! the end each accumulator passes through `ss` once more, is divided by
//! the row's sum and written out as `Elem`.
//!
//! Workgroup memory: 45,572 bytes (the route needs 48 KiB, as every
//! cooperative-matrix kernel). Assumes subgroups of 32 invocations.
// variants: f16 f32_kvf16

enable f16;
enable wgpu_cooperative_matrix;

alias Elem = f32;
alias KvElem = Elem;

/// Invocations per workgroup: 4 subgroups of 32.
const WG: u32 = 128u;
/// Query rows per block (16 per subgroup).
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
/// Scores `[BQ, LDS]` (each subgroup its 16 rows); also the accumulators
/// on their way to a rescale or out.
var<workgroup> ss: array<f32, BQ * LDS>;
/// Probabilities `[BQ, LDP4]`, row-major.
var<workgroup> ps: array<vec4<f16>, BQ * LDP4>;
/// Per-invocation partial (row max, then row sum), read by its partner.
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
    let a = load_v(k0, kvh, n_keys, ch, lid);
    let b = load_v(k0, kvh, n_keys, ch, lid + WG);
    store_vt(ch, lid, a);
    store_vt(ch, lid + WG, b);
}

/// Stages chunk `ch` (64 dims) of the key tile at `k0` (the second: the
/// first is loaded a tile ahead, in `main`).
fn stage_k(k0: u32, kvh: u32, n_keys: u32, ch: u32, lid: u32) {
    let kk0 = load_k(k0, kvh, n_keys, ch, lid + 0u * WG);
    let k1 = load_k(k0, kvh, n_keys, ch, lid + 1u * WG);
    let k2 = load_k(k0, kvh, n_keys, ch, lid + 2u * WG);
    let k3 = load_k(k0, kvh, n_keys, ch, lid + 3u * WG);
    let k4 = load_k(k0, kvh, n_keys, ch, lid + 4u * WG);
    let k5 = load_k(k0, kvh, n_keys, ch, lid + 5u * WG);
    let k6 = load_k(k0, kvh, n_keys, ch, lid + 6u * WG);
    let k7 = load_k(k0, kvh, n_keys, ch, lid + 7u * WG);
    kv[kv_at(ch, lid + 0u * WG)] = kk0;
    kv[kv_at(ch, lid + 1u * WG)] = k1;
    kv[kv_at(ch, lid + 2u * WG)] = k2;
    kv[kv_at(ch, lid + 3u * WG)] = k3;
    kv[kv_at(ch, lid + 4u * WG)] = k4;
    kv[kv_at(ch, lid + 5u * WG)] = k5;
    kv[kv_at(ch, lid + 6u * WG)] = k6;
    kv[kv_at(ch, lid + 7u * WG)] = k7;
}

/// Scales the 64 columns of this invocation's half of its row in `ss`
/// (row `at`, columns `2 j + hf`) by `alpha`.
fn scale_row(at: u32, hf: u32, alpha: f32) {
    for (var j = 0u; j < 32u; j++) {
        ss[at + 2u * j + hf] *= alpha;
    }
}

/// Writes 32 dims (`vec4` columns `c4_0 .. c4_0 + 8`, of the 64 held in
/// `ss` from dim `d0`) of output row `i0 + r`, divided by its sum; rows
/// past the prompt and dims past the head dim are not written.
fn emit(at: u32, i0: u32, r: u32, rows: u32, h: u32, d0: u32, hf: u32, inv: f32) {
    let d4 = p.head_dim / 4u;
    if r >= rows {
        return;
    }
    let base = ((i0 + r) * p.n_heads + h) * d4;
    for (var j = 0u; j < 8u; j++) {
        let c = hf * 32u + j * 4u;
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
    // This invocation's row of the block and its half of the row's
    // columns (interleaved: `2 j + hf`).
    let r = sg * 16u + lane / 2u;
    let hf = lane % 2u;
    let row_last = select(n_keys - 1u, p.start_pos + i0 + r, r < rows);
    // The subgroup's rows in `kv`, `ss` and `ps`; this row in `ss`.
    let qrow = sg * 16u * KVS4;
    let srow = sg * 16u * LDS;
    let prow = sg * 16u * LDP4;
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
        ss[srow + (e / 16u) * LDS + e % 16u] = 0.0;
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
    let zc = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow], LDS);
    var o0 = zc;
    var o1 = zc;
    var o2 = zc;
    var o3 = zc;
    var o4 = zc;
    var o5 = zc;
    var o6 = zc;
    var o7 = zc;

    // The first 64 dims of the next key tile, loaded a tile ahead (during
    // the last tile's P V) and stored at the top of the loop.
    var kn0 = load_k(0u, kvh, n_keys, 0u, lid + 0u * WG);
    var kn1 = load_k(0u, kvh, n_keys, 0u, lid + 1u * WG);
    var kn2 = load_k(0u, kvh, n_keys, 0u, lid + 2u * WG);
    var kn3 = load_k(0u, kvh, n_keys, 0u, lid + 3u * WG);
    var kn4 = load_k(0u, kvh, n_keys, 0u, lid + 4u * WG);
    var kn5 = load_k(0u, kvh, n_keys, 0u, lid + 5u * WG);
    var kn6 = load_k(0u, kvh, n_keys, 0u, lid + 6u * WG);
    var kn7 = load_k(0u, kvh, n_keys, 0u, lid + 7u * WG);
    var m_ref = NEG;
    var l_part = 0.0;
    for (var k0 = 0u; k0 < n_keys; k0 += BK) {
        // The last tile's values, probabilities and scores are consumed.
        workgroupBarrier();
        // The values' first 64 dims are loaded now and stored after the
        // scores, so their latency hides behind the scores' multiplies.
        let va = load_v(k0, kvh, n_keys, 0u, lid);
        let vb = load_v(k0, kvh, n_keys, 0u, lid + WG);
        kv[kv_at(0u, lid + 0u * WG)] = kn0;
        kv[kv_at(0u, lid + 1u * WG)] = kn1;
        kv[kv_at(0u, lid + 2u * WG)] = kn2;
        kv[kv_at(0u, lid + 3u * WG)] = kn3;
        kv[kv_at(0u, lid + 4u * WG)] = kn4;
        kv[kv_at(0u, lid + 5u * WG)] = kn5;
        kv[kv_at(0u, lid + 6u * WG)] = kn6;
        kv[kv_at(0u, lid + 7u * WG)] = kn7;
        if wide {
            stage_k(k0, kvh, n_keys, 1u, lid);
        }
        workgroupBarrier();
        // S = Q K^T, 16 keys at a time: B(d, key) = K[key, d], column-major.
        for (var j = 0u; j < 4u; j++) {
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
        // This invocation's 32 scores (its `vec4` columns `2 j + hf`), read
        // once, right after their barrier: two scalar passes over `ss` (64
        // strided reads a tile) took more than half the kernel's time on
        // the H200 (run am: 1.26 -> 0.57 ms at the 1B's 2,048 rows).
        let sb = at + 4u * hf;
        let sv0 = vec4<f32>(ss[sb + 0u], ss[sb + 1u], ss[sb + 2u], ss[sb + 3u]);
        let sv1 = vec4<f32>(ss[sb + 8u], ss[sb + 9u], ss[sb + 10u], ss[sb + 11u]);
        let sv2 = vec4<f32>(ss[sb + 16u], ss[sb + 17u], ss[sb + 18u], ss[sb + 19u]);
        let sv3 = vec4<f32>(ss[sb + 24u], ss[sb + 25u], ss[sb + 26u], ss[sb + 27u]);
        let sv4 = vec4<f32>(ss[sb + 32u], ss[sb + 33u], ss[sb + 34u], ss[sb + 35u]);
        let sv5 = vec4<f32>(ss[sb + 40u], ss[sb + 41u], ss[sb + 42u], ss[sb + 43u]);
        let sv6 = vec4<f32>(ss[sb + 48u], ss[sb + 49u], ss[sb + 50u], ss[sb + 51u]);
        let sv7 = vec4<f32>(ss[sb + 56u], ss[sb + 57u], ss[sb + 58u], ss[sb + 59u]);
        store_vt(0u, lid, va);
        store_vt(0u, lid + WG, vb);
        if wide {
            stage_v(k0, kvh, n_keys, 1u, lid);
        }
        // The tile's max of the row (log2 units), over its unmasked keys.
        var pm = NEG;
        pm = masked_max(pm, sv0, k0 + 0u + 4u * hf, row_last, cs);
        pm = masked_max(pm, sv1, k0 + 8u + 4u * hf, row_last, cs);
        pm = masked_max(pm, sv2, k0 + 16u + 4u * hf, row_last, cs);
        pm = masked_max(pm, sv3, k0 + 24u + 4u * hf, row_last, cs);
        pm = masked_max(pm, sv4, k0 + 32u + 4u * hf, row_last, cs);
        pm = masked_max(pm, sv5, k0 + 40u + 4u * hf, row_last, cs);
        pm = masked_max(pm, sv6, k0 + 48u + 4u * hf, row_last, cs);
        pm = masked_max(pm, sv7, k0 + 56u + 4u * hf, row_last, cs);
        red[lid] = pm;
        workgroupBarrier();
        let mt = max(pm, red[lid ^ 1u]);
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
        // this invocation's `vec4` columns `2 j + hf`.
        var l_tile = 0.0;
        let p0 = masked_p(sv0, k0 + 0u + 4u * hf, row_last, cs, m_ref);
        l_tile += f32(p0.x) + f32(p0.y) + f32(p0.z) + f32(p0.w);
        ps[r * LDP4 + 0u + hf] = p0;
        let p1 = masked_p(sv1, k0 + 8u + 4u * hf, row_last, cs, m_ref);
        l_tile += f32(p1.x) + f32(p1.y) + f32(p1.z) + f32(p1.w);
        ps[r * LDP4 + 2u + hf] = p1;
        let p2 = masked_p(sv2, k0 + 16u + 4u * hf, row_last, cs, m_ref);
        l_tile += f32(p2.x) + f32(p2.y) + f32(p2.z) + f32(p2.w);
        ps[r * LDP4 + 4u + hf] = p2;
        let p3 = masked_p(sv3, k0 + 24u + 4u * hf, row_last, cs, m_ref);
        l_tile += f32(p3.x) + f32(p3.y) + f32(p3.z) + f32(p3.w);
        ps[r * LDP4 + 6u + hf] = p3;
        let p4 = masked_p(sv4, k0 + 32u + 4u * hf, row_last, cs, m_ref);
        l_tile += f32(p4.x) + f32(p4.y) + f32(p4.z) + f32(p4.w);
        ps[r * LDP4 + 8u + hf] = p4;
        let p5 = masked_p(sv5, k0 + 40u + 4u * hf, row_last, cs, m_ref);
        l_tile += f32(p5.x) + f32(p5.y) + f32(p5.z) + f32(p5.w);
        ps[r * LDP4 + 10u + hf] = p5;
        let p6 = masked_p(sv6, k0 + 48u + 4u * hf, row_last, cs, m_ref);
        l_tile += f32(p6.x) + f32(p6.y) + f32(p6.z) + f32(p6.w);
        ps[r * LDP4 + 12u + hf] = p6;
        let p7 = masked_p(sv7, k0 + 56u + 4u * hf, row_last, cs, m_ref);
        l_tile += f32(p7.x) + f32(p7.y) + f32(p7.z) + f32(p7.w);
        ps[r * LDP4 + 14u + hf] = p7;
        l_part += l_tile;
        // Probabilities and values visible; every score and the flag read.
        workgroupBarrier();
        if lid == 0u {
            flag.x = 0u;
        }
        // (At the first tile too, where the accumulators are still zero:
        // naga's uniformity analysis takes the loop's counter for
        // non-uniform, so the condition cannot name it.)
        if rescale {
            coopStoreT(o0, &ss[srow + 0u], LDS);
            coopStoreT(o1, &ss[srow + 16u], LDS);
            coopStoreT(o2, &ss[srow + 32u], LDS);
            coopStoreT(o3, &ss[srow + 48u], LDS);
            workgroupBarrier();
            scale_row(at, hf, alpha);
            workgroupBarrier();
            o0 = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow + 0u], LDS);
            o1 = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow + 16u], LDS);
            o2 = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow + 32u], LDS);
            o3 = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow + 48u], LDS);
            if wide {
                workgroupBarrier();
                coopStoreT(o4, &ss[srow + 0u], LDS);
                coopStoreT(o5, &ss[srow + 16u], LDS);
                coopStoreT(o6, &ss[srow + 32u], LDS);
                coopStoreT(o7, &ss[srow + 48u], LDS);
                workgroupBarrier();
                scale_row(at, hf, alpha);
                workgroupBarrier();
                o4 = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow + 0u], LDS);
                o5 = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow + 16u], LDS);
                o6 = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow + 32u], LDS);
                o7 = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow + 48u], LDS);
            }
        }
        // The next key tile's first 64 dims (zeros past the keys).
        kn0 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 0u * WG);
        kn1 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 1u * WG);
        kn2 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 2u * WG);
        kn3 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 3u * WG);
        kn4 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 4u * WG);
        kn5 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 5u * WG);
        kn6 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 6u * WG);
        kn7 = load_k(k0 + BK, kvh, n_keys, 0u, lid + 7u * WG);
        // O += P V, 16 keys a step: B(key, d) = V^T[d, key], column-major.
        for (var kk = 0u; kk < 4u; kk++) {
            let pa = coopLoadT<coop_mat16x16<f16, A>>(&ps[prow + kk * 4u], LDP4);
            let vb = kk * 4u;
            o0 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 0u * LDV4], LDV4), o0);
            o1 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 16u * LDV4], LDV4), o1);
            o2 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 32u * LDV4], LDV4), o2);
            o3 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 48u * LDV4], LDV4), o3);
            if wide {
                o4 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 64u * LDV4], LDV4), o4);
                o5 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 80u * LDV4], LDV4), o5);
                o6 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 96u * LDV4], LDV4), o6);
                o7 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 112u * LDV4], LDV4), o7);
            }
        }
    }

    // The row's sum from its two halves; then O / sum, 64 dims at a time.
    workgroupBarrier();
    red[lid] = l_part;
    coopStoreT(o0, &ss[srow + 0u], LDS);
    coopStoreT(o1, &ss[srow + 16u], LDS);
    coopStoreT(o2, &ss[srow + 32u], LDS);
    coopStoreT(o3, &ss[srow + 48u], LDS);
    workgroupBarrier();
    let inv = 1.0 / (l_part + red[lid ^ 1u]);
    emit(at, i0, r, rows, h, 0u, hf, inv);
    if wide {
        workgroupBarrier();
        coopStoreT(o4, &ss[srow + 0u], LDS);
        coopStoreT(o5, &ss[srow + 16u], LDS);
        coopStoreT(o6, &ss[srow + 32u], LDS);
        coopStoreT(o7, &ss[srow + 48u], LDS);
        workgroupBarrier();
        emit(at, i0, r, rows, h, 64u, hf, inv);
    }
}
