"""v9_regs: each invocation reads its 32 scores from `ss` once, right after
the barrier that makes them visible, and the max and the probabilities use
those registers (no later scalar read of `ss` in the tile). Written after
run ah for the next device session: the dumps showed later reads of `ss`
seeing other values than a read right after the barrier.

Usage: python variants2.py [V0] (V0: the shipped f32-query variant as
`ShaderId::source` gives it, default .attn/v0.wgsl); writes .attn/v9_regs.wgsl.
"""
import sys

src = sys.argv[1] if len(sys.argv) > 1 else ".attn/v0.wgsl"
base = open(src).read()


def rep(s, old, new):
    assert s.count(old) == 1, (old[:70], s.count(old))
    return s.replace(old, new)


helpers = '''
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
'''
v = rep(base, "@compute @workgroup_size(WG)", helpers + "\n@compute @workgroup_size(WG)")
reads = "        // This invocation's 32 scores (its `vec4` columns `2 j + hf`), read\n        // once, right after their barrier.\n        let sb = at + 4u * hf;\n"
for j in range(8):
    o = 8 * j
    reads += (f"        let sv{j} = vec4<f32>(ss[sb + {o}u], ss[sb + {o + 1}u], ss[sb + {o + 2}u], "
              f"ss[sb + {o + 3}u]);\n")
v = rep(v, """        // The keys are consumed and the scores visible: values into their place.
        workgroupBarrier();
""", """        // The keys are consumed and the scores visible: values into their place.
        workgroupBarrier();
""" + reads)
old_max = v[v.index("        var pm = NEG;\n        for (var j = 0u; j < 32u; j++) {"):v.index("        red[lid] = pm;")]
new_max = "        var pm = NEG;\n" + "".join(
    f"        pm = masked_max(pm, sv{j}, k0 + {8 * j}u + 4u * hf, row_last, cs);\n" for j in range(8))
v = v.replace(old_max, new_max)
start = v.index("        var l_tile = 0.0;\n        for (var j = 0u; j < 8u; j++) {")
end = v.index("        l_part += l_tile;")
new_p = "        var l_tile = 0.0;\n"
for j in range(8):
    new_p += (f"        let p{j} = masked_p(sv{j}, k0 + {8 * j}u + 4u * hf, row_last, cs, m_ref);\n"
              f"        l_tile += f32(p{j}.x) + f32(p{j}.y) + f32(p{j}.z) + f32(p{j}.w);\n"
              f"        ps[r * LDP4 + {2 * j}u + hf] = p{j};\n")
v = v[:start] + new_p + v[end:]
open(".attn/v9_regs.wgsl", "w").write(v)
print("wrote .attn/v9_regs.wgsl")
