"""v10_scalar_pv: the shipped kernel with `O += P V` done by each invocation
in plain WGSL (its row, half of the dims, f32 registers), reading the same
`ps` and `V^T` the matrix units read; the rescale scales those registers
and the end writes them out. The scores `S = Q K^T` stay on the matrix
units. Written in run ak (session 15), after the memory-model fix left
the attention wrong: if it passes, the fault is in the `P V` fragments
(or the accumulators' trip through `ss`); if it fails like `v0`, in the
scores and softmax.

Usage: python variants3.py [V0] (V0: the shipped f32-query variant as
`ShaderId::source` gives it, default .attn/v0.wgsl); writes
.attn/v10_scalar_pv.wgsl.
"""
import re
import sys

src = sys.argv[1] if len(sys.argv) > 1 else ".attn/v0.wgsl"
base = open(src).read()


def rep(s, old, new):
    assert s.count(old) == 1, (old[:70], s.count(old))
    return s.replace(old, new)


s = base
# Accumulators: registers instead of fragments.
s = re.sub(r"    var o0 = zc;\n(    var o[1-7] = zc;\n){7}", "    var acc: array<vec4<f32>, 16>;\n    let half4 = d4 / 2u;\n", s)
# The rescale: scale the registers.
i = s.index("        if rescale {\n            coopStoreT(o0")
j = s.index("        // The next key tile's first 64 dims")
s = s[:i] + "        if rescale {\n            for (var i = 0u; i < 16u; i++) {\n                acc[i] *= alpha;\n            }\n        }\n" + s[j:]
# P V in plain WGSL.
i = s.index("        // O += P V, 16 keys a step")
j = s.index("    // The row's sum from its two halves")
pv = """        for (var key = 0u; key < BK; key++) {
            let pk = f32(ps[r * LDP4 + key / 4u][key % 4u]);
            for (var i = 0u; i < 16u; i++) {
                if i < half4 {
                    let d = 4u * (hf * half4 + i);
                    let v = vec4<f32>(
                        f32(kv[d * LDV4 + key / 4u][key % 4u]),
                        f32(kv[(d + 1u) * LDV4 + key / 4u][key % 4u]),
                        f32(kv[(d + 2u) * LDV4 + key / 4u][key % 4u]),
                        f32(kv[(d + 3u) * LDV4 + key / 4u][key % 4u]),
                    );
                    acc[i] += pk * v;
                }
            }
        }
    }

"""
s = s[:i] + pv + s[j:]
# The end: the row's sum, then the registers out.
i = s.index("    // The row's sum from its two halves")
end = """    workgroupBarrier();
    red[lid] = l_part;
    workgroupBarrier();
    let inv = 1.0 / (l_part + red[lid ^ 1u]);
    if r < rows {
        for (var i = 0u; i < 16u; i++) {
            let c4 = hf * half4 + i;
            if i < half4 && c4 < d4 {
                out[((i0 + r) * p.n_heads + h) * d4 + c4] = vec4<Elem>(acc[i] * inv);
            }
        }
    }
}
"""
s = s[:i] + end
open(".attn/v10_scalar_pv.wgsl", "w").write(s)

# v11_scalar: v10 with the scores in plain WGSL too (each invocation its
# row's query in registers, its 32 columns `2 j + hf` of the tile), so no
# cooperative-matrix operation is left: if it passes on the H200, the ~7e-2
# fault is the matrix units' `S = Q K^T` (or its store into `ss`); if it
# fails, plain code of this kernel behaves differently there.


def plain_scores(src):
    """`src` with its scores `S = Q K^T` in plain WGSL: each invocation its
    row's query in registers, its 32 columns `2 j + hf` of the tile."""
    x = rep(src, "    let qa0 = coopLoadT", """    var qr: array<vec4<f32>, 32>;
    for (var c = 0u; c < 32u; c++) {
        qr[c] = vec4<f32>(kv[r * KVS4 + c]);
    }
    let qa0 = coopLoadT""")
    i = x.index("        // S = Q K^T, 16 keys at a time")
    j = x.index("        // The keys are consumed and the scores visible")
    return x[:i] + """        for (var j = 0u; j < 32u; j++) {
            let col = 2u * j + hf;
            var dot = vec4<f32>();
            for (var c = 0u; c < 32u; c++) {
                if c < d4 {
                    dot += qr[c] * vec4<f32>(kv[col * KVS4 + c]);
                }
            }
            ss[at + col] = dot.x + dot.y + dot.z + dot.w;
        }
""" + x[j:]


t = plain_scores(s)
open(".attn/v11_scalar.wgsl", "w").write(t)

# v12_restage: v10 (scores on the matrix units, `P V` plain) with the query
# block staged again from the `q` buffer at the top of every key tile and
# its fragments loaded there, so no fragment is held while `kv` is
# overwritten: if it passes where v10 fails, holding `qa0..7` across the
# loop is the fault.
u = open(".attn/v10_scalar_pv.wgsl").read()
stage = u[u.index("    for (var e = lid; e < BQ * 32u; e += WG) {"):u.index("    for (var e = lane; e < 256u; e += 32u) {")]
loads = u[u.index("    let qa0 = coopLoadT"):u.index("    let zc = coopLoadT")]
indent = lambda b: "".join("    " + l if l.strip() else l for l in b.splitlines(True))
top = "        // The last tile's values, probabilities and scores are consumed.\n        workgroupBarrier();\n"
u = rep(u, top, top + indent(stage) + "        workgroupBarrier();\n" + indent(loads) + "        workgroupBarrier();\n")
open(".attn/v12_restage.wgsl", "w").write(u)

# v13_coop_pv: the shipped kernel with only the scores in plain WGSL (v11's
# score code), `P V` and its accumulators (rescale and end through `ss`)
# on the matrix units as shipped: whether `P V` alone is at fault.
w = plain_scores(base)
open(".attn/v13_coop_pv.wgsl", "w").write(w)
