//! Staging of the x tile for the cooperative-matrix GEMMs
//! (`*_coop*.wgsl`): 8 halves at a time, rounded to f16. The kernel that
//! includes this declares `p.m`, `p.k`, `x` (`array<vec4<Elem>>`), `xs`
//! (`array<vec4<f16>>`) and the constant `TK`.

/// 8 consecutive halves (16 bytes).
struct Eight {
    lo: vec4<f16>,
    hi: vec4<f16>,
}

/// 8 inputs of x: row `m0 + i / (TK / 8)`, inputs `k0 + (i % (TK / 8)) * 8
/// ..` (zeros past M), rounded to f16.
fn load_x(m0: u32, k0: u32, i: u32) -> Eight {
    let row = m0 + i / (TK / 8u);
    if row >= p.m {
        return Eight(vec4<f16>(), vec4<f16>());
    }
    let at = (row * p.k + k0) / 4u + (i % (TK / 8u)) * 2u;
    return Eight(vec4<f16>(x[at]), vec4<f16>(x[at + 1u]));
}

/// Where `load_x`'s unit `i` goes in a staged x tile, in halves.
fn x_at(i: u32) -> u32 {
    return (i / (TK / 8u)) * (TK + 8u) + (i % (TK / 8u)) * 8u;
}

/// Stores 8 halves at half `o` (a multiple of 8) of the x tiles.
fn store_x(o: u32, v: Eight) {
    xs[o / 4u] = v.lo;
    xs[o / 4u + 1u] = v.hi;
}

/// 8 inputs of x as `load_x` takes them (row `m0 + i / (TK / 8)`,
/// inputs `k0 + (i % (TK / 8)) * 8 ..`, zeros past M), still as `Elem`:
/// the loads of the next step are held in this form across the current
/// step's products, and rounded to f16 only as they are staged
/// (`store_raw_x`), so no instruction waits on them before then (on the
/// H200 the 4-bit GEMM of the 1B's O and down projections went from ~72
/// to ~118 TFLOP/s, run am).
struct RawEight {
    lo: vec4<Elem>,
    hi: vec4<Elem>,
}

fn load_raw_x(m0: u32, k0: u32, i: u32) -> RawEight {
    let row = m0 + i / (TK / 8u);
    if row >= p.m {
        return RawEight(vec4<Elem>(), vec4<Elem>());
    }
    let at = (row * p.k + k0) / 4u + (i % (TK / 8u)) * 2u;
    return RawEight(x[at], x[at + 1u]);
}

fn store_raw_x(o: u32, v: RawEight) {
    store_x(o, Eight(vec4<f16>(v.lo), vec4<f16>(v.hi)));
}
