"""Fourth round of speed variants of the prompt attention (run am), on top
of `variants8.py`'s `x1_vt2` (scores in registers, transposed value
stores over the banks; 0.57 ms at 2,048 rows on the H200, ~30 TFLOP/s,
where leaving out either product saves only ~12% and loading a tile
ahead, `variants9.py`, nothing: the kernel waits on latency with 4 warps
a workgroup).

- `wg256`: 8 subgroups (256 invocations) a workgroup over the same block
  of 64 query rows and tiles of 64 keys, so twice the warps a workgroup
  and half the serial work a subgroup. Subgroup `sg` takes row group
  `g = sg % 4` (rows `16 g ..`) and half `hs = sg / 4`: the scores of its
  rows for keys `32 hs .. 32 hs + 31` (2 fragments of 4), and `O` of its
  rows for dims `32 hs .. 32 hs + 31` (and `64 + 32 hs ..` past 64; 2
  accumulators, 4 for D 128, over all 64 keys of `P`). The softmax takes
  4 invocations a row (row `lid / 4`, quarter `qt = lid % 4`: 16 scores,
  `vec4` runs at columns `16 j + 4 qt`), the row max and sum combined
  over the 4 through `red`; the lazy workgroup-uniform rescale as before.
  K and V staging over all 256 invocations (4 key units, 1 value unit
  each). Workgroup memory 46,096 bytes (`red` twice as long).
- `wg256` + `d64` (`variants7.py`): the same, head dims up to 64 only.

Usage: python variants10.py [V0]; writes `.attn/t/w*.wgsl` (V0, default
`.attn/t/v0.wgsl`, the shipped f32-query kernel; `x1_vt2` is made from it
as `variants8.py` does).
"""
import sys

from variants7 import rep, regs, d64
from variants8 import vt2

HEADER = '''//! Causal attention over a float16 KV cache for prompts on cooperative
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
//! interleaved `vec4` columns `16 j + 4 qt`) take the tile's max of the
//! scaled scores (log2 units, combined through `red`), then write
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
//! Workgroup memory: 46,096 bytes (the route needs 48 KiB, as every
//! cooperative-matrix kernel). Assumes subgroups of 32 invocations.
'''

MAIN = '''@compute @workgroup_size(WG)
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
'''


def wg256(v):
    v = HEADER + v[v.index("// variants:"):]
    v = rep(v, '''/// Invocations per workgroup: 4 subgroups of 32.
const WG: u32 = 128u;
/// Query rows per block (16 per subgroup).''', '''/// Invocations per workgroup: 8 subgroups of 32.
const WG: u32 = 256u;
/// Query rows per block (16 per row group of two subgroups).''')
    v = rep(v, '''/// Scores `[BQ, LDS]` (each subgroup its 16 rows); also the accumulators
/// on their way to a rescale or out.''', '''/// Scores `[BQ, LDS]` (each subgroup its 16 rows, 32 columns); also the
/// accumulators on their way to a rescale or out.''')
    v = rep(v, "/// Per-invocation partial (row max, then row sum), read by its partner.",
            "/// Per-invocation partial (row max, then row sum), read by the row's four.")
    # Values: one unit (4 keys x 4 dims) an invocation.
    v = rep(v, '''fn stage_v(k0: u32, kvh: u32, n_keys: u32, ch: u32, lid: u32) {
    let a = load_v(k0, kvh, n_keys, ch, lid);
    let b = load_v(k0, kvh, n_keys, ch, lid + WG);
    store_vt(ch, lid, a);
    store_vt(ch, lid + WG, b);
}''', '''fn stage_v(k0: u32, kvh: u32, n_keys: u32, ch: u32, lid: u32) {
    store_vt(ch, lid, load_v(k0, kvh, n_keys, ch, lid));
}''')
    # Keys: 4 units (1,024 a chunk) an invocation.
    old = "".join(f"    let {'kk0' if n == 0 else f'k{n}'} = load_k(k0, kvh, n_keys, ch, lid + {n}u * WG);\n"
                  for n in range(8))
    old += "".join(f"    kv[kv_at(ch, lid + {n}u * WG)] = {'kk0' if n == 0 else f'k{n}'};\n" for n in range(8))
    new = "".join(f"    let {'kk0' if n == 0 else f'k{n}'} = load_k(k0, kvh, n_keys, ch, lid + {n}u * WG);\n"
                  for n in range(4))
    new += "".join(f"    kv[kv_at(ch, lid + {n}u * WG)] = {'kk0' if n == 0 else f'k{n}'};\n" for n in range(4))
    v = rep(v, old, new)
    v = rep(v, '''/// Scales the 64 columns of this invocation's half of its row in `ss`
/// (row `at`, columns `2 j + hf`) by `alpha`.
fn scale_row(at: u32, hf: u32, alpha: f32) {
    for (var j = 0u; j < 32u; j++) {
        ss[at + 2u * j + hf] *= alpha;
    }
}''', '''/// Scales this invocation's quarter of the 64 columns of its row in `ss`
/// (row `at`, columns `4 j + qt`) by `alpha`.
fn scale_row(at: u32, qt: u32, alpha: f32) {
    for (var j = 0u; j < 16u; j++) {
        ss[at + 4u * j + qt] *= alpha;
    }
}''')
    v = rep(v, '''/// Writes 32 dims (`vec4` columns `c4_0 .. c4_0 + 8`, of the 64 held in
/// `ss` from dim `d0`) of output row `i0 + r`, divided by its sum; rows
/// past the prompt and dims past the head dim are not written.
fn emit(at: u32, i0: u32, r: u32, rows: u32, h: u32, d0: u32, hf: u32, inv: f32) {''',
            '''/// Writes 16 dims (`vec4` columns `4 j + qt` of the 64 held in `ss` from
/// dim `d0`) of output row `i0 + r`, divided by its sum; rows past the
/// prompt and dims past the head dim are not written.
fn emit(at: u32, i0: u32, r: u32, rows: u32, h: u32, d0: u32, qt: u32, inv: f32) {''')
    v = rep(v, '''    for (var j = 0u; j < 8u; j++) {
        let c = hf * 32u + j * 4u;''', '''    for (var j = 0u; j < 4u; j++) {
        let c = j * 16u + qt * 4u;''')
    return v[:v.index("@compute @workgroup_size(WG)")] + MAIN


if __name__ == "__main__":
    src = sys.argv[1] if len(sys.argv) > 1 else ".attn/t/v0.wgsl"
    base = vt2(regs(open(src).read()))
    out = {
        "w1_wg256": wg256(base),
        "w2_wg256_d64": d64(wg256(base)),
    }
    for name, text in out.items():
        open(f".attn/t/{name}.wgsl", "w").write(text)
        print(f"wrote .attn/t/{name}.wgsl")
