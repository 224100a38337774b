base=open('/work/main/.attn/v0.wgsl').read()
def ins_after(s, anchor, code):
    assert s.count(anchor)==1, anchor[:60]
    return s.replace(anchor, anchor+code)
rows_ss='''
        for (var jj = 0u; jj < 8u; jj++) {
            let c = hf * 32u + 4u * jj;
            out[(h * BQ + r) * 16u + c / 4u] = vec4<f32>(ss[at + c], ss[at + c + 1u], ss[at + c + 2u], ss[at + c + 3u]);
        }
        return;
'''
dS=ins_after(base, """        // The keys are consumed and the scores visible: values into their place.
        workgroupBarrier();""", rows_ss)
dP=ins_after(base, """        // Probabilities and values visible; every score and the flag read.
        workgroupBarrier();""", '''
        for (var jj = 0u; jj < 8u; jj++) {
            let g = hf * 8u + jj;
            out[(h * BQ + r) * 16u + g] = vec4<f32>(ps[r * LDP4 + g]);
        }
        return;
''')
anchor="""                o7 = coopMultiplyAdd(pa, coopLoad<coop_mat16x16<f16, B>>(&kv[vb + 112u * LDV4], LDV4), o7);
            }
        }"""
dO=ins_after(base, anchor, '''
        workgroupBarrier();
        coopStoreT(o0, &ss[srow + 0u], LDS);
        coopStoreT(o1, &ss[srow + 16u], LDS);
        coopStoreT(o2, &ss[srow + 32u], LDS);
        coopStoreT(o3, &ss[srow + 48u], LDS);
        workgroupBarrier();'''+rows_ss)
# the V^T tile as staged: dims 0..63 x keys 0..63 (row d of V^T, cols keys)
dV=ins_after(base, """        // Probabilities and values visible; every score and the flag read.
        workgroupBarrier();""", '''
        // row r = dim, this invocation's half of the keys
        for (var jj = 0u; jj < 8u; jj++) {
            let g = hf * 8u + jj;
            out[(h * BQ + r) * 16u + g] = vec4<f32>(kv[r * LDV4 + g]);
        }
        return;
''')
for n,v in [('dS',dS),('dP',dP),('dO',dO),('dV',dV)]:
    open(f'/work/main/.attn/{n}.wgsl','w').write(v)
print('ok')
