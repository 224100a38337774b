//! The GEMM variants `coop_probe` fills in from `coop_probe.wgsl`: how each
//! tiles the output and stages its operands ([`Tiling`]), the tilings it
//! times ([`TILINGS`], [`NEW_TILINGS`]), and the WGSL pieces the template's
//! holes take for each weight format and staging element ([`fill`]).

use std::fmt::Write as _;

use crate::kernels::Weights;

const TEMPLATE: &str = include_str!("../coop_probe.wgsl");

/// How a template variant tiles the output and stages its operands.
#[derive(Clone, Copy, Debug)]
pub struct Tiling {
    /// Subgroups along M and N.
    pub sgm: u32,
    pub sgn: u32,
    /// 16 x 16 fragments per subgroup along M and N.
    pub fm: u32,
    pub fn_: u32,
    /// Inputs per K step (a multiple of 16; of 32 for 4-bit weights). One
    /// that is not a power of two has a K tail (`k_tail`).
    pub tk: u32,
    /// Halves of padding per staged row (`TK + pad` a multiple of 8).
    pub pad: u32,
    /// Copies of each staged tile (1, or 2: the next step's loads in flight).
    pub stages: u32,
    /// With one copy: the next step's loads issued after the staging
    /// barrier and held in registers during the products (as
    /// `matmul_coop_large.wgsl`).
    pub prefetch: bool,
    /// Staging elements of `vec4<f16>` instead of f16 scalars.
    pub wide: bool,
    /// Fragments loaded from the buffers, no staging (dense only).
    pub direct: bool,
}

impl Tiling {
    /// Output rows per workgroup.
    pub fn bm(&self) -> u32 {
        self.sgm * self.fm * 16
    }

    /// Output columns per workgroup.
    pub fn bn(&self) -> u32 {
        self.sgn * self.fn_ * 16
    }

    fn invocations(&self) -> u32 {
        self.sgm * self.sgn * 32
    }

    /// Whether the step has a K tail: one that is not a power of two does
    /// not divide the shapes' K (powers of two), so the kernel takes
    /// `ceil(K / TK)` steps and stages zeros past K (K a multiple of 16).
    pub fn k_tail(&self) -> bool {
        !self.tk.is_power_of_two()
    }

    /// Staging units per invocation for `n` rows of the tile in units of
    /// `per` inputs, if they divide evenly.
    fn units(&self, n: u32, per: u32) -> Option<u32> {
        let u = n * self.tk / per / self.invocations();
        (u >= 1 && u * per * self.invocations() == n * self.tk).then_some(u)
    }

    /// Whether the template makes this tiling for `weights`: direct ones
    /// and those with a K tail are dense only, 4-bit weights stage whole
    /// 32-input words (`tk` a multiple of 32) and their units must divide.
    pub fn fits(&self, weights: Weights) -> bool {
        match weights {
            Weights::Dense => true,
            Weights::Q4 => {
                !self.direct
                    && !self.k_tail()
                    && self.tk.is_multiple_of(32)
                    && self.units(self.bm(), 8).is_some()
                    && self.units(self.bn(), 16).is_some()
            }
        }
    }

    /// Workgroup memory the kernel declares, in bytes.
    pub fn workgroup_bytes(&self) -> u32 {
        let staged = if self.direct { 0 } else { self.stages * (self.bm() + self.bn()) * (self.tk + self.pad) * 2 };
        staged + self.sgm * self.sgn * 1024
    }

    /// The name: the tilings from before padding and prefetch were knobs
    /// (padding 8, a K step a multiple of 32, no prefetch) keep their
    /// names (`tk32 s1 h4`), the others show both (`tk48 p0 s1 pf h4`).
    pub fn name(&self) -> String {
        let staging = if self.direct {
            "direct h4".to_string()
        } else {
            let pad = if self.pad == 8 && self.tk.is_multiple_of(32) && !self.prefetch {
                String::new()
            } else {
                format!(" p{}", self.pad)
            };
            format!(
                "tk{}{pad} s{}{} {}",
                self.tk,
                self.stages,
                if self.prefetch { " pf" } else { "" },
                if self.wide { "h4" } else { "f16" }
            )
        };
        format!("{}x{} {}x{}sg {}x{}fr {staging}", self.bm(), self.bn(), self.sgm, self.sgn, self.fm, self.fn_)
    }
}

/// A staged `vec4<f16>` tiling: subgroups, fragments, K step, padding,
/// stages, prefetch.
pub const fn wide(sg: (u32, u32), fr: (u32, u32), tk: u32, pad: u32, stages: u32, prefetch: bool) -> Tiling {
    Tiling { sgm: sg.0, sgn: sg.1, fm: fr.0, fn_: fr.1, tk, pad, stages, prefetch, wide: true, direct: false }
}

/// The template tilings, each made for both weight formats (the direct
/// ones for dense weights only).
pub const TILINGS: &[Tiling] = &[
    // The shipped tiling with vec4 staging and loads in flight.
    Tiling { sgm: 2, sgn: 4, fm: 2, fn_: 2, tk: 32, pad: 8, stages: 2, prefetch: false, wide: true, direct: false },
    // 4 x 2 fragments a subgroup: f16 staging (as shipped), then vec4<f16>.
    Tiling { sgm: 2, sgn: 4, fm: 4, fn_: 2, tk: 32, pad: 8, stages: 1, prefetch: false, wide: false, direct: false },
    Tiling { sgm: 2, sgn: 4, fm: 4, fn_: 2, tk: 32, pad: 8, stages: 1, prefetch: false, wide: true, direct: false },
    Tiling { sgm: 2, sgn: 4, fm: 4, fn_: 2, tk: 32, pad: 8, stages: 2, prefetch: false, wide: false, direct: false },
    Tiling { sgm: 2, sgn: 4, fm: 4, fn_: 2, tk: 32, pad: 8, stages: 2, prefetch: false, wide: true, direct: false },
    Tiling { sgm: 2, sgn: 4, fm: 4, fn_: 2, tk: 64, pad: 8, stages: 1, prefetch: false, wide: true, direct: false },
    // 4 x 4 fragments a subgroup.
    Tiling { sgm: 2, sgn: 2, fm: 4, fn_: 4, tk: 32, pad: 8, stages: 2, prefetch: false, wide: true, direct: false },
    Tiling { sgm: 2, sgn: 4, fm: 4, fn_: 4, tk: 32, pad: 8, stages: 1, prefetch: false, wide: true, direct: false },
    Tiling { sgm: 4, sgn: 2, fm: 4, fn_: 4, tk: 32, pad: 8, stages: 1, prefetch: false, wide: true, direct: false },
    // No staging: fragments from the buffers through vec4<f16> pointers.
    Tiling { sgm: 2, sgn: 4, fm: 2, fn_: 2, tk: 32, pad: 8, stages: 1, prefetch: false, wide: true, direct: true },
    Tiling { sgm: 2, sgn: 4, fm: 4, fn_: 2, tk: 32, pad: 8, stages: 1, prefetch: false, wide: true, direct: true },
];

/// The tilings of the row-padding, prefetch and K-step knobs (`new` times
/// only these and the shipped kernels).
pub const NEW_TILINGS: &[Tiling] = &[
    // The shipped large kernel's form: one copy, prefetch (a baseline).
    wide((4, 2), (4, 4), 32, 8, 1, true),
    // Unpadded rows, a longer step in the same memory (45,056 bytes).
    wide((4, 2), (4, 4), 48, 0, 1, true),
    wide((2, 4), (4, 4), 48, 0, 1, true),
    // Two copies of a short step: one barrier a step.
    wide((4, 2), (4, 4), 16, 8, 2, false),
    // 128 x 128: 4 subgroups (two workgroups may share an SM), then 8.
    wide((2, 2), (4, 4), 64, 8, 1, true),
    wide((2, 4), (4, 2), 64, 8, 1, true),
    // Exactly 49,152 bytes with `cs`.
    wide((2, 4), (4, 2), 80, 0, 1, true),
    // Controls: the longer step without the loads in flight; unpadded rows
    // at the shipped step (the bank cost alone); the 128 x 256 form at it.
    wide((4, 2), (4, 4), 48, 0, 1, false),
    wide((4, 2), (4, 4), 32, 0, 1, true),
    wide((2, 4), (4, 4), 32, 8, 1, true),
    // 16 subgroups of 4 x 2 fragments (512 invocations): twice the warps an
    // SM to hide the barriers, half the accumulators each (47,104 bytes).
    wide((4, 4), (4, 2), 32, 8, 1, true),
];

pub fn fill(weights: Weights, t: &Tiling) -> String {
    // Dense staging moves units of 8 inputs and the products take 16 a
    // fragment (`tk / 16` of them a step); 4-bit weights stage 32-input
    // words, without a K tail.
    assert!(t.tk.is_multiple_of(16) && (t.stages == 1 || t.stages == 2), "bad tiling {t:?}");
    assert!(t.fits(weights), "{t:?} does not fit {weights:?} weights");
    assert!(!(t.direct && (weights == Weights::Q4 || !t.wide)), "direct variants are dense and wide: {t:?}");
    assert!(!t.prefetch || (t.stages == 1 && !t.direct), "prefetch is for one staged copy: {t:?}");
    // Rows of whole staging elements, 16-byte aligned.
    assert!((t.tk + t.pad).is_multiple_of(8), "{t:?}: rows of TK + pad halves must be 16-byte aligned");
    let he = if t.wide { 4 } else { 1 };
    let wg = t.invocations();
    let units = |n: u32, per: u32| {
        t.units(n, per).unwrap_or_else(|| panic!("{t:?}: {n} x {} in units of {per} over {wg}", t.tk))
    };
    let ux = units(t.bm(), 8);
    let uw = match weights {
        Weights::Dense => units(t.bn(), 8),
        Weights::Q4 => units(t.bn(), 16),
    };
    let (weight_decl, weight_fns) = match weights {
        Weights::Dense => (DENSE_DECL, DENSE_FNS),
        Weights::Q4 => (Q4_DECL, Q4_FNS),
    };
    let staging = if t.direct {
        String::new()
    } else if t.wide {
        WIDE_STAGING.to_string()
    } else {
        HALF_STAGING.to_string()
    };

    // The accumulators start from zeros loaded from `cs`, as in the shipped
    // kernels (known to work on the H200; naga writes the zero constructor
    // `coop_mat16x16<f32, C>()` as an OpConstantNull of the matrix type).
    let mut acc = String::from(
        "    for (var e = 0u; e < 8u; e++) {\n        cs[lid * 8u + e] = 0.0;\n    }\n    workgroupBarrier();\n",
    );
    for (i, j) in fragments(t) {
        let _ = writeln!(acc, "    var c{i}_{j} = coopLoadT<coop_mat16x16<f32, C>>(&cs[0], 16u);");
    }
    acc.push_str("    workgroupBarrier();\n");

    // The global loads of one step at input `k`, each as `{decl}gx0 =
    // ..` (`let `, `var ` or an assignment) with `indent`.
    let loads_at = |indent: &str, decl: &str, k: &str| {
        let mut s = String::new();
        for u in 0..ux {
            let _ = writeln!(s, "{indent}{decl}gx{u} = load_x(m0, {k}, {u}u * WG + lid);");
        }
        for u in 0..uw {
            let _ = writeln!(s, "{indent}{decl}gw{u} = load_w(n0, {k}, {u}u * WG + lid);");
        }
        s
    };
    let loads = loads_at("        ", "let ", "k0");
    let stores = |st: &str| {
        let mut s = String::new();
        for u in 0..ux {
            let _ = writeln!(s, "        store_x({st} * XS_HALVES + x_at({u}u * WG + lid), gx{u});");
        }
        for u in 0..uw {
            match weights {
                Weights::Dense => {
                    let _ = writeln!(s, "        store_w({st} * WS_HALVES + w_at({u}u * WG + lid), gw{u});");
                }
                Weights::Q4 => {
                    let _ = writeln!(
                        s,
                        "        {{\n            let o = {st} * WS_HALVES + w_at({u}u * WG + lid);\n            \
                         store_w(o, deq8(gw{u}.word.x, gw{u}.scale));\n            \
                         store_w(o + 8u, deq8(gw{u}.word.y, gw{u}.scale));\n        }}"
                    );
                }
            }
        }
        s
    };
    // The products of one 16-input step, as a block: fragment `a{i}` loaded
    // from `a(i)` (a pointer and stride), `b{j}` from `b(j)`, then every
    // accumulator's multiply-add.
    let products = |s: &mut String, a: &dyn Fn(u32) -> String, b: &dyn Fn(u32) -> String| {
        s.push_str("        {\n");
        for i in 0..t.fm {
            let _ = writeln!(s, "            let a{i} = coopLoadT<coop_mat16x16<f16, A>>({});", a(i));
        }
        for j in 0..t.fn_ {
            let _ = writeln!(s, "            let b{j} = coopLoad<coop_mat16x16<f16, B>>({});", b(j));
        }
        for (i, j) in fragments(t) {
            let _ = writeln!(s, "            c{i}_{j} = coopMultiplyAdd(a{i}, b{j}, c{i}_{j});");
        }
        s.push_str("        }\n");
    };
    let multiply = |st: &str| {
        let mut s = String::new();
        let _ = writeln!(s, "        let xb = {st} * XS_LEN;\n        let wb = {st} * WS_LEN;");
        for step in 0..t.tk / 16 {
            let ko = step * 16 / he;
            products(&mut s, &|i| format!("&xs[xb + (wm + {}u) * LDE + {ko}u], LDE", 16 * i), &|j| {
                format!("&ws[wb + (wn + {}u) * LDE + {ko}u], LDE", 16 * j)
            });
        }
        s
    };
    let main_loop = if t.direct {
        let mut s = String::new();
        s.push_str("    // Fragment rows of x and w, in vec4<f16>; the row stride.\n    let kw = p.k / 4u;\n");
        for i in 0..t.fm {
            let _ = writeln!(s, "    let xr{i} = (m0 + wm + {}u) * kw;", 16 * i);
        }
        for j in 0..t.fn_ {
            let _ = writeln!(s, "    let wr{j} = (n0 + wn + {}u) * kw;", 16 * j);
        }
        s.push_str("    for (var t = 0u; t < nk; t++) {\n        let kq = t * (TK / 4u);\n");
        for step in 0..t.tk / 16 {
            let ko = 4 * step;
            products(&mut s, &|i| format!("&x[xr{i} + kq + {ko}u], kw"), &|j| format!("&w[wr{j} + kq + {ko}u], kw"));
        }
        s.push_str("    }\n");
        s
    } else if t.prefetch {
        format!(
            "    // The first step's loads; each step then issues the next step's\n    \
             // loads right after staging its own, so they arrive during its\n    \
             // products (the last step loads its own tile again, in bounds).\n{}    \
             for (var t = 0u; t < nk; t++) {{\n{}        workgroupBarrier();\n        \
             let kn = min(t + 1u, nk - 1u) * TK;\n{}{}        workgroupBarrier();\n    }}\n",
            loads_at("    ", "var ", "0u"),
            stores("0u"),
            loads_at("        ", "", "kn"),
            multiply("0u")
        )
    } else if t.stages == 1 {
        format!(
            "    for (var t = 0u; t < nk; t++) {{\n        let k0 = t * TK;\n{loads}{}        workgroupBarrier();\n{}        \
             workgroupBarrier();\n    }}\n",
            stores("0u"),
            multiply("0u")
        )
    } else {
        format!(
            "    {{\n        let k0 = 0u;\n{loads}{}    }}\n    workgroupBarrier();\n    \
             for (var t = 0u; t < nk; t++) {{\n        let cur = t % 2u;\n        \
             // The next step's tile (the last one again at the end: stored\n        \
             // where nothing reads it any more).\n        \
             let k0 = min(t + 1u, nk - 1u) * TK;\n{loads}{}{}        workgroupBarrier();\n    }}\n",
            stores("0u"),
            multiply("cur"),
            stores("(1u - cur)")
        )
    };
    let mut epilogue = String::from("    let slot = sg * 256u;\n");
    for (i, j) in fragments(t) {
        let _ = writeln!(
            epilogue,
            "    coopStoreT(c{i}_{j}, &cs[slot], 16u);\n    workgroupBarrier();\n    \
             emit(sg, lane, m0 + wm + {}u, n0 + wn + {}u);\n    workgroupBarrier();",
            16 * i,
            16 * j
        );
    }
    let (k_guard, nk) =
        if t.k_tail() { (" || k0 + (i % (TK / 8u)) * 8u >= p.k", "(p.k + TK - 1u) / TK") } else { ("", "p.k / TK") };
    let out = TEMPLATE
        .replace("{{FM}}", &t.fm.to_string())
        .replace("{{FN}}", &t.fn_.to_string())
        .replace("{{SGM}}", &t.sgm.to_string())
        .replace("{{SGN}}", &t.sgn.to_string())
        .replace("{{TK}}", &t.tk.to_string())
        .replace("{{PAD}}", &t.pad.to_string())
        .replace("{{HE}}", &he.to_string())
        .replace("{{STAGES}}", &t.stages.to_string())
        .replace("{{WEIGHTS}}", weight_decl)
        .replace("{{WEIGHT_FNS}}", weight_fns)
        .replace("{{STAGING}}", &staging)
        .replace("{{ACCUMULATORS}}", &acc)
        .replace("{{MAIN_LOOP}}", &main_loop)
        .replace("{{EPILOGUE}}", &epilogue)
        .replace("{{K_GUARD}}", k_guard)
        .replace("{{NK}}", nk);
    assert!(!out.contains("{{"), "a hole left in the template for {t:?}");
    out
}

fn fragments(t: &Tiling) -> impl Iterator<Item = (u32, u32)> + use<> {
    let fn_ = t.fn_;
    (0..t.fm).flat_map(move |i| (0..fn_).map(move |j| (i, j)))
}

const DENSE_DECL: &str = "\
/// w, 4 halves an element.
@group(0) @binding(2) var<storage, read> w: array<vec4<f16>>;";

const DENSE_FNS: &str = "\
/// 8 halves of w: column `n0 + i / (TK / 8)`, inputs `k0 + (i % (TK / 8)) *
/// 8 ..` (zeros past N, and past K with a K tail).
fn load_w(n0: u32, k0: u32, i: u32) -> Eight {
    let col = n0 + i / (TK / 8u);
    if col >= p.n{{K_GUARD}} {
        return Eight(vec4<f16>(), vec4<f16>());
    }
    let at = (col * p.k + k0) / 4u + (i % (TK / 8u)) * 2u;
    return Eight(w[at], w[at + 1u]);
}

/// Where `load_w`'s unit `i` goes in a staged weight tile, in halves.
fn w_at(i: u32) -> u32 {
    return (i / (TK / 8u)) * (TK + PAD) + (i % (TK / 8u)) * 8u;
}";

const Q4_DECL: &str = "\
/// 4-bit weights, word-major, as the two 8-byte halves of each 16-byte
/// word (16 nibbles, low nibble first: inputs `k ..` from bit 0).
@group(0) @binding(2) var<storage, read> weights: array<vec2<u32>>;
/// f16 scales `[K / group, n_pad]`.
@group(0) @binding(3) var<storage, read> scales: array<f16>;";

const Q4_FNS: &str = "\
/// 16 nibbles of one weight column and their scale.
struct Nibbles {
    word: vec2<u32>,
    scale: f16,
}

/// Input offset in the tile of unit `i` (16 inputs): adjacent units are
/// the two halves of a column's word, then adjacent columns (adjacent in
/// the word-major layout), then the tile's next word.
fn unit_k(i: u32) -> u32 {
    return (i / (2u * BN)) * 32u + (i % 2u) * 16u;
}

fn load_w(n0: u32, k0: u32, i: u32) -> Nibbles {
    let col = n0 + (i / 2u) % BN;
    let k = k0 + unit_k(i);
    if col >= p.n {
        return Nibbles(vec2<u32>(0u), 0.0h);
    }
    return Nibbles(weights[((k / 32u) * p.n + col) * 2u + i % 2u], scales[(k / p.group_size) * p.n_pad + col]);
}

/// Where `load_w`'s unit `i` goes in a staged weight tile, in halves.
fn w_at(i: u32) -> u32 {
    return ((i / 2u) % BN) * (TK + PAD) + unit_k(i);
}

/// The 8 nibbles of `word` as halves `(q - 8) * s`, in input order:
/// `0x6400 | q` is the half `1024 + q`, so two nibbles become two exact
/// values with one mask and one or; `(q - 8) * s` is exact in f32 and
/// rounded once to f16. (naga 30 types a `bitcast` from u32 to
/// `vec2<f16>` as `vec2<f32>`, so the halves go through f32.)
fn deq8(word: u32, s: f16) -> Eight {
    let s2 = vec2<f32>(f32(s));
    let mask = 0x000F000Fu;
    let one = 0x64006400u;
    // Inputs (0, 4), (1, 5), (2, 6), (3, 7).
    let a = (unpack2x16float((word & mask) | one) - 1032.0) * s2;
    let b = (unpack2x16float(((word >> 4u) & mask) | one) - 1032.0) * s2;
    let c = (unpack2x16float(((word >> 8u) & mask) | one) - 1032.0) * s2;
    let d = (unpack2x16float(((word >> 12u) & mask) | one) - 1032.0) * s2;
    return Eight(vec4<f16>(vec4<f32>(a.x, b.x, c.x, d.x)), vec4<f16>(vec4<f32>(a.y, b.y, c.y, d.y)));
}";

const WIDE_STAGING: &str = "\
/// Staged x tiles, row-major, and weight tiles, column-major, 4 halves an
/// element.
var<workgroup> xs: array<vec4<f16>, STAGES * XS_LEN>;
var<workgroup> ws: array<vec4<f16>, STAGES * WS_LEN>;

/// Stores 8 halves at half `o` (a multiple of 8) of the x tiles.
fn store_x(o: u32, v: Eight) {
    xs[o / 4u] = v.lo;
    xs[o / 4u + 1u] = v.hi;
}

fn store_w(o: u32, v: Eight) {
    ws[o / 4u] = v.lo;
    ws[o / 4u + 1u] = v.hi;
}";

const HALF_STAGING: &str = "\
/// Staged x tiles, row-major, and weight tiles, column-major, one half an
/// element (as the shipped kernels).
var<workgroup> xs: array<f16, STAGES * XS_LEN>;
var<workgroup> ws: array<f16, STAGES * WS_LEN>;

/// Stores 8 halves at half `o` of the x tiles.
fn store_x(o: u32, v: Eight) {
    xs[o] = v.lo.x;
    xs[o + 1u] = v.lo.y;
    xs[o + 2u] = v.lo.z;
    xs[o + 3u] = v.lo.w;
    xs[o + 4u] = v.hi.x;
    xs[o + 5u] = v.hi.y;
    xs[o + 6u] = v.hi.z;
    xs[o + 7u] = v.hi.w;
}

fn store_w(o: u32, v: Eight) {
    ws[o] = v.lo.x;
    ws[o + 1u] = v.lo.y;
    ws[o + 2u] = v.lo.z;
    ws[o + 3u] = v.lo.w;
    ws[o + 4u] = v.hi.x;
    ws[o + 5u] = v.hi.y;
    ws[o + 6u] = v.hi.z;
    ws[o + 7u] = v.hi.w;
}";
