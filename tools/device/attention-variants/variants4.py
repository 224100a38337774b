"""Run ak's sixth call: which fragment layout the H200 gets wrong. `v10`
(scores on the matrix units) fails for subgroup 0 already, `v13` (`P V`
on them) for subgroups 1-3 only; the GEMMs, which pass, keep every f32
fragment in compact 16-wide slots and their f16 rows under 256 bytes.

- `vA_kvs18` = `v10` with the staged query/key rows 18 `vec4<f16>` apart
  (144 bytes, not 272): head dim 64 only (the D 128 cases fail by
  construction). Passes at D 64 if row strides of 256 bytes and more are
  what the matrix units' loads get wrong.
- `vB_compact_acc` = `v13` with the accumulators' trips through `ss`
  (zero, rescale, end) in compact 16-wide slots (`coopStoreT` /
  `coopLoadT` with stride 16, each subgroup's four at `srow + 256 i`).
- `vC_compact_s` = `v10` with each 16 x 16 block of scores stored to a
  compact slot (stride 16) and read from there by the plain code.

Usage: python variants4.py (reads .attn/v10_scalar_pv.wgsl and
.attn/v13_coop_pv.wgsl, from variants3.py).
"""
import re


def rep(s, old, new, count=1):
    assert s.count(old) == count, (old[:70], s.count(old))
    return s.replace(old, new)


v10 = open(".attn/v10_scalar_pv.wgsl").read()
v13 = open(".attn/v13_coop_pv.wgsl").read()

cidx = """
/// Compact 16-wide slot index of element (row `rr` of the subgroup's 16,
/// column `col` of 64) of the subgroup block at `base`.
fn cidx(base: u32, rr: u32, col: u32) -> u32 {
    return base + (col / 16u) * 256u + rr * 16u + col % 16u;
}
"""

# vA: row stride of staged rows 18 vec4<f16> (144 bytes), D 64 only.
a = v10
a = rep(a, "const KVS4: u32 = 34u;", "const KVS4: u32 = 18u;")
a = rep(a, """    for (var e = lid; e < BQ * 32u; e += WG) {
        let row = e / 32u;
        let c = e % 32u;""", """    for (var e = lid; e < BQ * 16u; e += WG) {
        let row = e / 16u;
        let c = e % 16u;""")
open(".attn/vA_kvs18.wgsl", "w").write(a)

# The zero fragment from a compact slot (both B and C).
def compact_zero(s):
    s = rep(s, "        ss[srow + (e / 16u) * LDS + e % 16u] = 0.0;", "        ss[srow + e] = 0.0;")
    s = rep(s, "let zc = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow], LDS);",
            "let zc = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow], 16u);")
    return s


def compact_acc(s):
    """The accumulators' trips through `ss` (zero, rescale, end) in compact
    16-wide slots: `coopStoreT` / `coopLoadT` with stride 16, each
    subgroup's four at `srow + 256 i`, scaled and emitted through `cidx`."""
    s = re.sub(r"&ss\[srow \+ (\d+)u\], LDS\)", lambda m: f"&ss[srow + {int(m.group(1)) * 16}u], 16u)", s)
    s = rep(s, "fn scale_row(at: u32, hf: u32, alpha: f32) {", cidx + """
fn scale_c(base: u32, rr: u32, hf: u32, alpha: f32) {
    for (var j = 0u; j < 32u; j++) {
        let i = cidx(base, rr, 2u * j + hf);
        ss[i] *= alpha;
    }
}

fn scale_row(at: u32, hf: u32, alpha: f32) {""")
    s = rep(s, "scale_row(at, hf, alpha);", "scale_c(srow, lane / 2u, hf, alpha);", count=2)
    s = rep(s, "fn emit(at: u32, i0: u32, r: u32, rows: u32, h: u32, d0: u32, hf: u32, inv: f32) {",
            "fn emit(sbase: u32, i0: u32, r: u32, rows: u32, h: u32, d0: u32, hf: u32, inv: f32) {\n    let rr = r % 16u;")
    s = rep(s, "let v = vec4<f32>(ss[at + c], ss[at + c + 1u], ss[at + c + 2u], ss[at + c + 3u]);",
            "let v = vec4<f32>(ss[cidx(sbase, rr, c)], ss[cidx(sbase, rr, c + 1u)], ss[cidx(sbase, rr, c + 2u)], ss[cidx(sbase, rr, c + 3u)]);")
    s = rep(s, "emit(at, i0, r, rows, h, 0u, hf, inv);", "emit(srow, i0, r, rows, h, 0u, hf, inv);")
    return rep(s, "emit(at, i0, r, rows, h, 64u, hf, inv);", "emit(srow, i0, r, rows, h, 64u, hf, inv);")


def compact_scores(s, add_cidx):
    """Each 16 x 16 block of scores stored to a compact slot (stride 16) and
    read from there by the plain code; `add_cidx` where `compact_acc` has
    not declared `cidx` already."""
    s = rep(s, "coopStoreT(s, &ss[srow + j * 16u], LDS);", "coopStoreT(s, &ss[srow + j * 256u], 16u);")
    if add_cidx:
        s = rep(s, "fn scale_row(at: u32, hf: u32, alpha: f32) {", cidx + "\nfn scale_row(at: u32, hf: u32, alpha: f32) {")
    s = rep(s, "pm = max(pm, ss[at + col] * cs);", "pm = max(pm, ss[cidx(srow, lane / 2u, col)] * cs);")
    return rep(s, "pr[t] = f16(exp2(ss[at + col] * cs - m_ref));",
               "pr[t] = f16(exp2(ss[cidx(srow, lane / 2u, col)] * cs - m_ref));")


# vB: accumulators through compact slots; vC: scores through compact
# slots; vD: the shipped kernel with both.
open(".attn/vB_compact_acc.wgsl", "w").write(compact_acc(compact_zero(v13)))
open(".attn/vC_compact_s.wgsl", "w").write(compact_scores(compact_zero(v10), add_cidx=True))
open(".attn/vD_compact.wgsl", "w").write(
    compact_scores(compact_acc(compact_zero(open(".attn/v0.wgsl").read())), add_cidx=False))

# Cross-subgroup rows: every plain statement about row `r` (its max,
# probabilities, sums, rescale and output) runs on the next subgroup,
# `(sg + 1) % 4`, not on the one whose fragments hold the row, so no
# invocation reads back through plain loads what its own subgroup's
# cooperative stores wrote. `vE_cross` = `v10` so, `vF_cross` = the
# shipped kernel so, `vG_cross` = `v13` so.
for name, src in [("vE_cross", v10), ("vF_cross", open(".attn/v0.wgsl").read()), ("vG_cross", v13)]:
    x = rep(src, "let r = sg * 16u + lane / 2u;", "let r = ((sg + 1u) % 4u) * 16u + lane / 2u;")
    open(f".attn/{name}.wgsl", "w").write(x)
