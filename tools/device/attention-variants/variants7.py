"""Speed variants of the cooperative-matrix prompt attention (run am),
each a copy of the shipped f32-query kernel (`sdpa_prefill_coop.wgsl` with
`KvElem = f16`, default `.attn/t/v0.wgsl`) with one or more changes, for
`attention_probe time FILE...` (checked against the f64 reference and timed
at the Llama-3.2-1B shapes):

- `d64`: the head dim fixed at most 64 (`wide` a constant false), so the
  second half's fragments (`qa4..7`, `o4..7`) and staging drop out of the
  compiled kernel: fewer registers, more workgroups an SM (files named
  `*_d64*` are checked and timed at D 64 only).
- `vrow`: values staged row-major like the keys (the kernel's plain
  vec4 stores instead of four scattered 8-byte stores a unit, which hit
  one or two banks) and read as the B operand by `coopLoadT` (the form
  `B row-major from vec4<f16> (stride 34)` that `attention_probe
  primitives` checks).
- `regs`: each invocation reads its 32 scores once, as 8 vec4 runs, right
  after their barrier; the max and the probabilities come from registers
  (run ai's `v9_regs`, redone on the fixed kernel).

Usage: python variants7.py [V0]; writes `.attn/t/v*.wgsl`.
"""
import sys


def rep(s, old, new, count=1):
    assert s.count(old) == count, (old[:80], s.count(old))
    return s.replace(old, new)


def d64(v):
    return rep(v, "let wide = p.head_dim > 64u;", "let wide = false;")


def vrow(v):
    # Loads of value rows in the keys' form.
    v = rep(v, "/// Four keys of the values:", '''/// Unit `i` of chunk `ch` of the value tile at `k0`, row-major as the
/// keys: zeros past `n_keys` and past the head dim.
fn load_vr(k0: u32, kvh: u32, n_keys: u32, ch: u32, i: u32) -> vec4<f16> {
    let key = k0 + i / 16u;
    let c = ch * 16u + i % 16u;
    let d4 = p.head_dim / 4u;
    if key >= n_keys || c >= d4 {
        return vec4<f16>();
    }
    return vec4<f16>(v_cache[(key * p.n_kv_heads + kvh) * d4 + c]);
}

/// Four keys of the values:''')
    v = rep(v, '''fn stage_v(k0: u32, kvh: u32, n_keys: u32, ch: u32, lid: u32) {
    let a = load_v(k0, kvh, n_keys, ch, lid);
    let b = load_v(k0, kvh, n_keys, ch, lid + WG);
    store_vt(ch, lid, a);
    store_vt(ch, lid + WG, b);
}''', '''fn stage_v(k0: u32, kvh: u32, n_keys: u32, ch: u32, lid: u32) {
    var x: array<vec4<f16>, 8>;
    for (var n = 0u; n < 8u; n++) {
        x[n] = load_vr(k0, kvh, n_keys, ch, lid + n * WG);
    }
    for (var n = 0u; n < 8u; n++) {
        kv[kv_at(ch, lid + n * WG)] = x[n];
    }
}''')
    v = rep(v, '''        let va = load_v(k0, kvh, n_keys, 0u, lid);
        let vb = load_v(k0, kvh, n_keys, 0u, lid + WG);''', '''        var vr: array<vec4<f16>, 8>;
        for (var n = 0u; n < 8u; n++) {
            vr[n] = load_vr(k0, kvh, n_keys, 0u, lid + n * WG);
        }''')
    v = rep(v, '''        store_vt(0u, lid, va);
        store_vt(0u, lid + WG, vb);''', '''        for (var n = 0u; n < 8u; n++) {
            kv[kv_at(0u, lid + n * WG)] = vr[n];
        }''')
    # P V: B(key, d) = V[key, d], row-major: coopLoadT.
    old_pv = v[v.index("        for (var kk = 0u; kk < 4u; kk++) {"):v.index("    // The row's sum from its two halves")]
    new_pv = '''        for (var kk = 0u; kk < 4u; kk++) {
            let pa = coopLoadT<coop_mat16x16<f16, A>>(&ps[prow + kk * 4u], LDP4);
            let vb = kk * 16u * KVS4;
            o0 = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kv[vb + 0u], KVS4), o0);
            o1 = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kv[vb + 4u], KVS4), o1);
            o2 = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kv[vb + 8u], KVS4), o2);
            o3 = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kv[vb + 12u], KVS4), o3);
            if wide {
                o4 = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kv[vb + 16u], KVS4), o4);
                o5 = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kv[vb + 20u], KVS4), o5);
                o6 = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kv[vb + 24u], KVS4), o6);
                o7 = coopMultiplyAdd(pa, coopLoadT<coop_mat16x16<f16, B>>(&kv[vb + 28u], KVS4), o7);
            }
        }
    }

'''
    v = v.replace(old_pv, new_pv)
    return v


HELPERS = '''
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


def regs(v):
    v = rep(v, "@compute @workgroup_size(WG)", HELPERS + "\n@compute @workgroup_size(WG)")
    reads = ("        // This invocation's 32 scores (its `vec4` columns `2 j + hf`), read\n"
             "        // once, right after their barrier.\n        let sb = at + 4u * hf;\n")
    for j in range(8):
        o = 8 * j
        reads += (f"        let sv{j} = vec4<f32>(ss[sb + {o}u], ss[sb + {o + 1}u], ss[sb + {o + 2}u], "
                  f"ss[sb + {o + 3}u]);\n")
    anchor = "        // The keys are consumed and the scores visible: values into their place.\n        workgroupBarrier();\n"
    v = rep(v, anchor, anchor + reads)
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
    return v[:start] + new_p + v[end:]


if __name__ == "__main__":
  src = sys.argv[1] if len(sys.argv) > 1 else ".attn/t/v0.wgsl"
  base = open(src).read()
  out = {
    "v1_d64": d64(base),
    "v2_vrow": vrow(base),
    "v3_regs": regs(base),
    "v4_vrow_regs": regs(vrow(base)),
    "v5_d64_vrow": d64(vrow(base)),
    "v6_d64_vrow_regs": d64(regs(vrow(base))),
  }
  for name, text in out.items():
    open(f".attn/t/{name}.wgsl", "w").write(text)
    print(f"wrote .attn/t/{name}.wgsl")
