import re
base=open('/work/main/.attn/v0.wgsl').read()
def rep(s,old,new,count=1):
    assert s.count(old)==count,(old[:70],s.count(old))
    return s.replace(old,new)
def v_select(s):
    s=rep(s,"""            if k0 + col <= row_last {
                pm = max(pm, ss[at + col] * cs);
            }""","""            pm = max(pm, select(NEG, ss[at + col] * cs, k0 + col <= row_last));""")
    s=rep(s,"""                if k0 + col <= row_last {
                    pr[t] = f16(exp2(ss[at + col] * cs - m_ref));
                }""","""                pr[t] = select(f16(0.0), f16(exp2(ss[at + col] * cs - m_ref)), k0 + col <= row_last);""")
    s=rep(s,"""        if lid == 0u {
            flag = 0u;
        }""","""        flag = 0u;""")
    s=rep(s,"""    if key >= n_keys || c >= d4 {
        return vec4<f16>();
    }
    return vec4<f16>(k_cache[(key * p.n_kv_heads + kvh) * d4 + c]);""","""    let ok = key < n_keys && c < d4;
    let x = vec4<f16>(k_cache[select(0u, (key * p.n_kv_heads + kvh) * d4 + c, ok)]);
    return select(vec4<f16>(), x, ok);""")
    s=rep(s,"""    if key >= n_keys || c >= d4 {
        return vec4<f16>();
    }
    return vec4<f16>(v_cache[(key * p.n_kv_heads + kvh) * d4 + c]);""","""    let ok = key < n_keys && c < d4;
    let x = vec4<f16>(v_cache[select(0u, (key * p.n_kv_heads + kvh) * d4 + c, ok)]);
    return select(vec4<f16>(), x, ok);""")
    return s
def v_zero(s):
    s=rep(s,"""    let zc = coopLoadT<coop_mat16x16<f32, C>>(&ss[srow], LDS);""","""    let zc = coop_mat16x16<f32, C>();""")
    return s
def v_barriers(s):
    # a barrier after every statement that runs a cooperative-matrix op (all in uniform control flow)
    out=[]
    for line in s.split('\n'):
        out.append(line)
        st=line.strip()
        if (st.startswith('o') or st.startswith('s =') or st.startswith('coopStoreT') or st.startswith('let qa') or st.startswith('let pa')) and ('coop' in st) and st.endswith(';'):
            ind=line[:len(line)-len(line.lstrip())]
            out.append(ind+'workgroupBarrier();')
    return '\n'.join(out)
variants={'v1_select':v_select(base),'v2_zero':v_zero(base),'v3_barriers':v_barriers(base),
          'v4_all':v_barriers(v_zero(v_select(base)))}
for k,v in variants.items():
    open(f'/work/main/.attn/{k}.wgsl','w').write(v)
print('ok')
