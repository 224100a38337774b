import numpy as np, sys
d=sys.argv[1]
f=lambda n: np.fromfile(f"{d}/{n}", dtype='<f4')
q=f("dump.q.bin").reshape(64,4,64); k=f("dump.k.bin").reshape(64,64)
cs=(1/np.sqrt(64))*1.4426950408889634
q16=q.astype(np.float16).astype(np.float64); K=k.astype(np.float64)
mask=np.tril(np.ones((64,64),bool))
for n in ["dS1","dS2"]:
    o=f(f"{n}.wgsl.out.bin").reshape(4,64,64)
    for h in range(4):
        S=q16[:,h,:]@K.T
        err=np.abs(o[h]-S)
        bad=np.argwhere(err>1e-3)
        print(n,h,"max err %.3e"%err.max(), "bad", len(bad), "rows", sorted(set(int(b[0]) for b in bad))[:10], "cols", sorted(set(int(b[1]) for b in bad))[:10])
o=f("dM.wgsl.out.bin").reshape(4,64,16,4)
for h in range(1):
    S=q16[:,h,:]@K.T
    for r in [0,1,2,17,40]:
        m=np.where(mask[r],S[r]*cs,-np.inf).max()
        print("row",r,"true m %.4f"%m,"hf0 pm,mt,m_ref,alpha",np.round(o[h,r,0],4),"hf1",np.round(o[h,r,1],4),"rescale,red,red^1,cs",np.round(o[h,r,2],4), np.round(o[h,r,3],4))
