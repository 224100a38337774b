import numpy as np, sys
d=sys.argv[1]
f=lambda n: np.fromfile(f"{d}/{n}", dtype='<f4')
q=f("dump.q.bin").reshape(64,4,64); k=f("dump.k.bin").reshape(64,64); v=f("dump.v.bin").reshape(64,64)
cs=(1/np.sqrt(64))*1.4426950408889634
q16=q.astype(np.float16).astype(np.float64)
K=k.astype(np.float64); V=v.astype(np.float64)
mask=np.tril(np.ones((64,64),bool))
def rep(name, got, want):
    err=np.abs(got-want); scale=np.abs(want).max()
    i=np.unravel_index(np.argmax(err), err.shape)
    print(f"{name}: max err {err.max():.3e} (scale {scale:.3e}) at {i}: got {got[i]:.5f} want {want[i]:.5f}")
    return err
for n in ["dS","dP","dO","dV"]:
    try: o=f(f"{n}.wgsl.out.bin").reshape(4,64,64)
    except FileNotFoundError: continue
    for h in range(4):
        S=q16[:,h,:]@K.T
        m=np.where(mask,S*cs,-np.inf).max(1,keepdims=True)
        P=np.where(mask,np.exp2(S*cs-m),0).astype(np.float16).astype(np.float64)
        O=P@V
        want={"dS":S,"dP":P,"dO":O,"dV":V.T}[n]
        err=rep(f"{n} head {h}", o[h], want)
        if n in ("dS","dP","dO") and h==0 and err.max()>1e-2*np.abs(want).max():
            bad=np.argwhere(err>1e-2*np.abs(want).max())
            rows=sorted(set(bad[:,0])); cols=sorted(set(bad[:,1]))
            print("   bad rows", rows[:20], "... n", len(rows), " bad cols", cols[:20], "... n", len(cols))
