"""Run ak's eighth call: cooperative-matrix operations under branches. The
GEMMs (which pass) never put one under an `if`; the attention does: the
head dims past 64 (`if wide`, uniform but only at run time) and the
rescale (`if rescale`). Head dim 64 only (the D 128 cases fail by
construction here).

- `vH_nowide` = `v10` (scores on the matrix units, `P V` plain) with the
  `if wide { ... }` block of the score loop removed.
- `vJ_nobranch` = the shipped kernel with every `if wide` block that holds
  fragment operations removed and the rescale's fragment trip done at
  every tile, unconditionally (its scale `alpha` is 1 where no rescale
  was needed).

Usage: python variants5.py (reads .attn/v0.wgsl and .attn/v10_scalar_pv.wgsl).
"""
import re


def drop_wide_coop(s):
    """Removes every `if wide { ... }` block whose body has a fragment op."""
    out, i = [], 0
    while True:
        j = s.find("if wide {", i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        depth, k = 0, j
        while True:
            if s[k] == "{":
                depth += 1
            elif s[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        body = s[j:k + 1]
        if "coop" in body:
            # Drop the block and the indentation before it.
            line_start = s.rfind("\n", 0, j) + 1
            out.append(s[i:line_start])
            i = k + 2 if s[k + 1] == "\n" else k + 1
        else:
            out.append(s[i:k + 1])
            i = k + 1


v0 = open(".attn/v0.wgsl").read()
v10 = open(".attn/v10_scalar_pv.wgsl").read()
open(".attn/vH_nowide.wgsl", "w").write(drop_wide_coop(v10))

j = drop_wide_coop(v0)
old = "        if rescale {\n            coopStoreT(o0"
assert j.count(old) == 1
j = j.replace(old, "        {\n            coopStoreT(o0")
open(".attn/vJ_nobranch.wgsl", "w").write(j)

# `vK_zero_s` = `v10` with each score block started from a constructed
# zero fragment, not from `zc` (loaded from `ss`, which the scores then
# overwrite). `vM_gemm_order` = `v10` with the scores computed in the
# GEMMs' order: the dims outer, four accumulators (one per 16-key block)
# held across them, stored once at the end.
k = v10.replace("            var s = zc;\n", "            var s = coop_mat16x16<f32, C>();\n")
assert k != v10
open(".attn/vK_zero_s.wgsl", "w").write(k)
i = v10.index("        // S = Q K^T, 16 keys at a time")
e = v10.index("        // The keys are consumed and the scores visible")
gemm = """        {
            var c0 = coop_mat16x16<f32, C>();
            var c1 = coop_mat16x16<f32, C>();
            var c2 = coop_mat16x16<f32, C>();
            var c3 = coop_mat16x16<f32, C>();
"""
for t, qa in enumerate(["qa0", "qa1", "qa2", "qa3"]):
    for jb in range(4):
        gemm += f"            c{jb} = coopMultiplyAdd({qa}, coopLoad<coop_mat16x16<f16, B>>(&kv[{jb * 16}u * KVS4 + {4 * t}u], KVS4), c{jb});\n"
gemm += """            coopStoreT(c0, &ss[srow + 0u], LDS);
            coopStoreT(c1, &ss[srow + 16u], LDS);
            coopStoreT(c2, &ss[srow + 32u], LDS);
            coopStoreT(c3, &ss[srow + 48u], LDS);
        }
"""
open(".attn/vM_gemm_order.wgsl", "w").write(v10[:i] + gemm + v10[e:])
