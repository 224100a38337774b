//! Dtype conversion, `out[i] = Elem(x[i])`: what `_to_dim_order_copy` and
//! `_to_copy` to another dtype become.
//!
//! The input is read as raw 32-bit words whatever its dtype (`src`: 0
//! float32, 1 float16, 2 int32, 3 bool), so one variant per output dtype
//! covers every source: float16 takes half a word per element, a bool a
//! whole word (0 or 1). Floats convert to ints by
//! truncation toward zero. `to_bool` writes `x != 0` as 0 or 1 (a bool is a
//! `u32` on the device, written through the `i32` variant).
// variants: f32 f16 i32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    src: u32,
    to_bool: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

/// Element `i` of a float source, as f32.
fn load_float(i: u32) -> f32 {
    if p.src == 1u {
        return unpack2x16float(x[i / 2u])[i % 2u];
    }
    return bitcast<f32>(x[i]);
}

/// Element `i` of an integer or bool source, as i32.
fn load_int(i: u32) -> i32 {
    if p.src == 3u {
        return select(0, 1, x[i] != 0u);
    }
    return bitcast<i32>(x[i]);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    let is_float = p.src <= 1u;
    if p.to_bool != 0u {
        var nonzero: bool;
        if is_float {
            // NaN is nonzero, as in PyTorch.
            nonzero = load_float(i) != 0.0;
        } else {
            nonzero = load_int(i) != 0;
        }
        out[i] = select(Elem(0), Elem(1), nonzero);
    } else if is_float {
        out[i] = Elem(load_float(i));
    } else {
        out[i] = Elem(load_int(i));
    }
}
