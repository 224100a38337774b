"""Run ak's eleventh call: fragment loads at an offset within a row. Every
variant whose errors stayed to the digit loads fragments at 0, 4, 8 and
12 `vec4<f16>` into a staged row (dims 0-15 ... 48-63); the GEMMs, which
pass, only ever at 0 and 4 (their K step is 32). `v13` (`P V` on the
matrix units) passed at 9 rows, where only its blocks at 0 and 4 carry
non-zero probabilities. So: are loads at 8 and 12 `vec4` (64 and 96
bytes) into a row what goes wrong?

`vN_chunked` = `v10` (scores on the matrix units, `P V` plain) with the
staged queries and keys laid out chunk-major: dims `16 t ..` of row
`row` at `kv[256 t + 4 row ..]` (16 dims a row, compact 16 x 16 tiles),
so every fragment load starts at the beginning of its row (stride 4
`vec4<f16>`), the chunk chosen by a whole-tile offset.

Usage: python variants6.py (reads .attn/v10_scalar_pv.wgsl).
"""
import re


def rep(s, old, new, count=1):
    assert s.count(old) == count, (old[:70], s.count(old))
    return s.replace(old, new)


v = open(".attn/v10_scalar_pv.wgsl").read()
v = rep(v, "    return (i / 16u) * KVS4 + ch * 16u + i % 16u;",
        "    let c = ch * 16u + i % 16u;\n    return (c / 4u) * 256u + (i / 16u) * 4u + c % 4u;")
v = rep(v, "        kv[row * KVS4 + c] = x;", "        kv[(c / 4u) * 256u + row * 4u + c % 4u] = x;")
v = re.sub(r"coopLoadT<coop_mat16x16<f16, A>>\(&kv\[qrow \+ (\d+)u\], KVS4\)",
           lambda m: f"coopLoadT<coop_mat16x16<f16, A>>(&kv[{int(m.group(1)) // 4 * 256}u + sg * 64u], 4u)", v)
v = re.sub(r"coopLoad<coop_mat16x16<f16, B>>\(&kv\[kb \+ (\d+)u\], KVS4\)",
           lambda m: f"coopLoad<coop_mat16x16<f16, B>>(&kv[{int(m.group(1)) // 4 * 256}u + j * 64u], 4u)", v)
open(".attn/vN_chunked.wgsl", "w").write(v)
