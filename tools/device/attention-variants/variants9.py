"""Third round (run am): the next tile's keys and values loaded a whole
tile ahead, on top of `variants8.py`'s `x1_vt2` (scores in registers,
transposed value stores over the banks). The shipped loop loads a tile's
values at its top and stores them after the scores (only the scores'
multiplies in between), and the next keys just before `P V` (only `P V`
in between), so up to two global latencies a tile wait in the open.

- `early`: the next tile's keys are loaded right after this tile's are
  stored (they have the whole tile to arrive), and the next tile's values
  right after this tile's are stored; both held in registers across the
  loop's barriers.

Usage: python variants9.py [V0]; writes `.attn/t/y*.wgsl`.
"""
import sys

from variants7 import rep, regs, d64
from variants8 import vt2


def early(v):
    # Values: loaded before the loop and after each tile's store, not at the top.
    v = rep(v, '''        // The values' first 64 dims are loaded now and stored after the
        // scores, so their latency hides behind the scores' multiplies.
        let va = load_v(k0, kvh, n_keys, 0u, lid);
        let vb = load_v(k0, kvh, n_keys, 0u, lid + WG);
''', "")
    v = rep(v, '''    var m_ref = NEG;
    var l_part = 0.0;
    for (var k0 = 0u;''', '''    // The first 64 dims of the first value tile, likewise.
    var va = load_v(0u, kvh, n_keys, 0u, lid);
    var vb = load_v(0u, kvh, n_keys, 0u, lid + WG);
    var m_ref = NEG;
    var l_part = 0.0;
    for (var k0 = 0u;''')
    v = rep(v, '''        store_vt(0u, lid, va);
        store_vt(0u, lid + WG, vb);
''', '''        store_vt(0u, lid, va);
        store_vt(0u, lid + WG, vb);
        // The next value tile's first 64 dims: a whole tile to arrive.
        va = load_v(k0 + BK, kvh, n_keys, 0u, lid);
        vb = load_v(k0 + BK, kvh, n_keys, 0u, lid + WG);
''')
    # Keys: the next tile's loaded right after this tile's are stored.
    loads = "".join(f"        kn{n} = load_k(k0 + BK, kvh, n_keys, 0u, lid + {n}u * WG);\n" for n in range(8))
    v = rep(v, "        // The next key tile's first 64 dims (zeros past the keys).\n" + loads, "")
    v = rep(v, "        kv[kv_at(0u, lid + 7u * WG)] = kn7;\n",
            "        kv[kv_at(0u, lid + 7u * WG)] = kn7;\n"
            "        // The next key tile's first 64 dims (zeros past the keys): a\n"
            "        // whole tile to arrive.\n" + loads)
    return v


if __name__ == "__main__":
    src = sys.argv[1] if len(sys.argv) > 1 else ".attn/t/v0.wgsl"
    base = vt2(regs(open(src).read()))
    out = {
        "y1_early": early(base),
        "y2_early_d64": d64(early(base)),
    }
    for name, text in out.items():
        open(f".attn/t/{name}.wgsl", "w").write(text)
        print(f"wrote .attn/t/{name}.wgsl")


def diagnostics(v):
    """Copies of `v` with one stage left out (wrong results, timing only):
    `nopv` (no `P V` products), `nos` (no score products: zero scores),
    `noexp` (probabilities not computed: the scores' registers stored as
    they are)."""
    out = {}
    a = v.index("        // O += P V, 16 keys a step")
    b = v.index("    // The row's sum from its two halves")
    out["diag_nopv"] = v[:a] + "    }\n\n" + v[b:]
    s = v
    for n in range(8):
        s = s.replace(f"            s = coopMultiplyAdd(qa{n}, coopLoad<coop_mat16x16<f16, B>>(&kv[kb + {4 * n}u], KVS4), s);\n", "")
    out["diag_nos"] = s
    return out


if __name__ == "__main__":
    for name, text in diagnostics(early(vt2(regs(open(".attn/t/v0.wgsl").read())))).items():
        open(f".attn/t/{name}.wgsl", "w").write(text)
        print(f"wrote .attn/t/{name}.wgsl")
