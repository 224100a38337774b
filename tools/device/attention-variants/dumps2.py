base=open('/work/main/.attn/v0.wgsl').read()
def ins_before(s, anchor, code):
    assert s.count(anchor)==1, anchor[:60]
    return s.replace(anchor, code+anchor)
anchor="""        // P = exp2(s - m_ref), rounded to f16 as the matrix units take it;"""
dS2=ins_before(base, anchor, '''        for (var jj = 0u; jj < 8u; jj++) {
            let c = hf * 32u + 4u * jj;
            out[(h * BQ + r) * 16u + c / 4u] = vec4<f32>(ss[at + c], ss[at + c + 1u], ss[at + c + 2u], ss[at + c + 3u]);
        }
        return;
''')
dM=ins_before(base, anchor, '''        out[(h * BQ + r) * 16u + hf] = vec4<f32>(pm, mt, m_ref, alpha);
        out[(h * BQ + r) * 16u + 2u + hf] = vec4<f32>(f32(rescale), red[lid], red[lid ^ 1u], cs);
        return;
''')
# scores as read by the max loop, re-read right after it (before red/barrier)
anchor2="""        red[lid] = pm;"""
dS1=ins_before(base, anchor2, '''        for (var jj = 0u; jj < 8u; jj++) {
            let c = hf * 32u + 4u * jj;
            out[(h * BQ + r) * 16u + c / 4u] = vec4<f32>(ss[at + c], ss[at + c + 1u], ss[at + c + 2u], ss[at + c + 3u]);
        }
        return;
''')
for n,v in [('dS1',dS1),('dS2',dS2),('dM',dM)]:
    open(f'/work/main/.attn/{n}.wgsl','w').write(v)
print('ok')
