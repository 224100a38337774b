//! One AdamW step in place (`et_vk.adamw_step`), one invocation per
//! element, in the order PyTorch's reference applies it:
//! `param *= 1 - lr * wd; m = beta1 * m + (1 - beta1) * g;
//! v = beta2 * v + (1 - beta2) * g * g;
//! param -= lr * (m / bc1) / (sqrt(v / bc2) + eps)`. The host computes
//! the scalar factors in f64 and passes them as f32, as PyTorch casts a
//! Python scalar to the tensor's dtype. f32 only, as upstream.
// variants: f32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
const WG: u32 = 256u;

struct Params {
    numel: u32,
    /// `1 - lr * weight_decay`.
    decay: f32,
    beta1: f32,
    /// `1 - beta1`.
    one_minus_beta1: f32,
    beta2: f32,
    /// `1 - beta2`.
    one_minus_beta2: f32,
    bias_correction1: f32,
    bias_correction2: f32,
    eps: f32,
    lr: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<Elem>;
@group(0) @binding(2) var<storage, read_write> param: array<Elem>;
@group(0) @binding(3) var<storage, read_write> m: array<Elem>;
@group(0) @binding(4) var<storage, read_write> v: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let g = grad[i];
    let decayed = param[i] * p.decay;
    let m1 = m[i] * p.beta1 + g * p.one_minus_beta1;
    let v1 = v[i] * p.beta2 + (g * g) * p.one_minus_beta2;
    let mhat = m1 / p.bias_correction1;
    let denom = sqrt(v1 / p.bias_correction2) + p.eps;
    m[i] = m1;
    v[i] = v1;
    param[i] = decayed + (-p.lr) * (mhat / denom);
}
