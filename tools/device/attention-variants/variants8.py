"""Second round of speed variants of the prompt attention (run am), on top
of `variants7.py`'s `regs` (scores read once into registers, 2.2x the
shipped kernel at 2,048 rows on the H200):

- `vt2`: the transposed value staging with each subgroup's 8-byte stores
  spread over the banks: unit `u` takes dims `4 (u % 4 + 4 (u / 64))` and
  keys `4 ((u / 4) % 16)`, so the 32 lanes of a store write 8 key columns
  of 4 dim rows (two wavefronts, the least for 256 bytes) where the
  shipped mapping put 16 lanes on one or two banks; each global load still
  fills whole 32-byte sectors.
- `sgmax`: the two invocations of a row exchange their halves' max by
  `subgroupShuffleXor` (they are neighbouring lanes) instead of through
  workgroup memory and a barrier (one barrier a tile fewer; needs
  subgroups).
- `fullrow`: each invocation takes the max over its whole row (its
  partner's 8 `vec4` of scores read too), no exchange and no barrier.

Usage: python variants8.py [V0]; writes `.attn/t/x*.wgsl`.
"""
import sys

from variants7 import rep, regs


def vt2(v):
    v = rep(v, '''    let key = k0 + 4u * (u / 16u);
    let c = ch * 16u + u % 16u;
    return V4(''', '''    let key = k0 + 4u * ((u / 4u) % 16u);
    let c = ch * 16u + u % 4u + 4u * (u / 64u);
    return V4(''')
    return rep(v, "    let at = (ch * 64u + 4u * (u % 16u)) * LDV4 + u / 16u;",
               "    let at = (ch * 64u + 4u * (u % 4u + 4u * (u / 64u))) * LDV4 + (u / 4u) % 16u;")


def sgmax(v):
    return rep(v, '''        red[lid] = pm;
        workgroupBarrier();
        let mt = max(pm, red[lid ^ 1u]);''', '''        let mt = max(pm, subgroupShuffleXor(pm, 1u));''')


def fullrow(v):
    other = "".join(
        f"        pm = masked_max(pm, vec4<f32>(ss[ob + {8 * j}u], ss[ob + {8 * j + 1}u], ss[ob + {8 * j + 2}u], "
        f"ss[ob + {8 * j + 3}u]), k0 + {8 * j}u + 4u * (1u - hf), row_last, cs);\n" for j in range(8))
    return rep(v, '''        red[lid] = pm;
        workgroupBarrier();
        let mt = max(pm, red[lid ^ 1u]);''', "        // The partner's half too: the row's max without an exchange.\n"
               "        let ob = at + 4u * (1u - hf);\n" + other + "        let mt = pm;")


if __name__ == "__main__":
    src = sys.argv[1] if len(sys.argv) > 1 else ".attn/t/v0.wgsl"
    base = regs(open(src).read())
    out = {
        "x1_vt2": vt2(base),
        "x2_vt2_sgmax": sgmax(vt2(base)),
        "x3_vt2_fullrow": fullrow(vt2(base)),
        "x4_sgmax": sgmax(base),
    }
    for name, text in out.items():
        open(f".attn/t/{name}.wgsl", "w").write(text)
        print(f"wrote .attn/t/{name}.wgsl")
