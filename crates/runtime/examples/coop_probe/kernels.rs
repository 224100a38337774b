//! The kernels `coop_probe` times: the shipped cooperative-matrix GEMMs
//! (as the kernel table holds them, or edited by a [`Patch`]) and the
//! variants filled in from `coop_probe.wgsl` (`template.rs`), their naga
//! validation, and their SPIR-V as wgpu's Vulkan backend writes it
//! (through wgpu's own naga, so the example needs no naga dependency of
//! its own; `spv-out` is on there with the Vulkan backend).

use etwgpu_kernels::ShaderId;
use etwgpu_kernels::ops::gemm::{COOP_DENSE_LARGE, COOP_Q4_LARGE, COOP_SMALL, COOP_SWIGLU_LARGE, CoopTile};
use wgpu::naga;

use crate::patch::Patch;
use crate::template::{NEW_TILINGS, TILINGS, Tiling, fill, wide};

/// The shipped 4-bit kernels the probe runs, as a pattern.
macro_rules! q4_shipped {
    () => {
        ShaderId::Q4GemmCoopF16 | ShaderId::Q4GemmCoopLargeF16 | ShaderId::Q4GemmCoopF32 | ShaderId::Q4GemmCoopLargeF32
    };
}

/// How the weights are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weights {
    /// f16 rows `[N, K]`.
    Dense,
    /// `q4gsw`: 4-bit, word-major, f16 scales `[K / 32, N]`.
    Q4,
}

/// One kernel the probe times.
#[derive(Clone, Copy, Debug)]
pub enum Kernel {
    /// A kernel-table shader as the runtime dispatches it.
    Shipped(ShaderId, Patch),
    /// A variant of `coop_probe.wgsl`.
    Template(Weights, Tiling),
}

/// What a kernel binds, in binding order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Params,
    X,
    W,
    Scales,
    Bias,
    Out,
}

impl Kernel {
    /// Every kernel for `weights`: the shipped ones first, then the
    /// template tilings that fit `weights` (with `only_new`, only
    /// `NEW_TILINGS`).
    pub fn all(weights: Weights, only_new: bool) -> Vec<Kernel> {
        let shipped: &[ShaderId] = match weights {
            Weights::Dense => &[ShaderId::MatmulCoopF16, ShaderId::MatmulCoopLargeF16],
            // The f32 variants are what the LLM prefill runs at `mixed`
            // (x, scales and out in float32, rounded to f16 as staged).
            Weights::Q4 => &[
                ShaderId::Q4GemmCoopF16,
                ShaderId::Q4GemmCoopLargeF16,
                ShaderId::Q4GemmCoopF32,
                ShaderId::Q4GemmCoopLargeF32,
            ],
        };
        let old: &[Tiling] = if only_new { &[] } else { TILINGS };
        let template = old.iter().chain(NEW_TILINGS).filter(|t| t.fits(weights));
        shipped
            .iter()
            .map(|&id| Kernel::Shipped(id, Patch::NONE))
            .chain(template.map(|&t| Kernel::Template(weights, t)))
            .collect()
    }

    /// `bisect`: the shipped large 4-bit kernel, its patched forms, its
    /// f32 variant and the template's form of its tiling.
    pub fn bisect() -> Vec<Kernel> {
        let id = ShaderId::Q4GemmCoopLargeF16;
        // The template's `j`: 128 x 256, 2 x 4 subgroups of 4 x 4 fragments,
        // K steps of 32, padded rows, the next loads in flight.
        let same = wide((2, 4), (4, 4), 32, 8, 1, true);
        let mut all = vec![Kernel::Shipped(id, Patch::NONE)];
        all.extend(Patch::BISECT.iter().map(|&p| Kernel::Shipped(id, p)));
        let f32_id = ShaderId::Q4GemmCoopLargeF32;
        all.push(Kernel::Shipped(f32_id, Patch::NONE));
        all.extend(Patch::OPERANDS.iter().map(|&p| Kernel::Shipped(f32_id, p)));
        all.push(Kernel::Template(Weights::Q4, same));
        all
    }

    /// Whether x, the scales, the bias and the output are float32 (a
    /// shipped kernel's f32 variant); else f16.
    pub fn f32_operands(&self) -> bool {
        matches!(self, Kernel::Shipped(id, _) if id.label().ends_with(".f32"))
    }

    /// Whether `binding` is float32: the f32 variant's, less those a
    /// [`Patch`] makes f16.
    pub fn f32_binding(&self, binding: Binding) -> bool {
        let Kernel::Shipped(_, patch) = self else { return false };
        let f16 = match binding {
            Binding::X => Patch::F16_X,
            Binding::Scales => Patch::F16_SCALES,
            Binding::Out => Patch::F16_OUT,
            _ => 0,
        };
        self.f32_operands() && patch.0 & f16 == 0
    }

    /// The weight format it reads.
    pub fn weights(&self) -> Weights {
        match self {
            Kernel::Shipped(q4_shipped!(), _) => Weights::Q4,
            Kernel::Shipped(..) => Weights::Dense,
            Kernel::Template(w, _) => *w,
        }
    }

    pub fn name(&self) -> String {
        match self {
            Kernel::Shipped(id, patch) => format!("{} (shipped){}", id.label(), patch.suffix()),
            Kernel::Template(_, t) => t.name(),
        }
    }

    /// Output rows and columns per workgroup.
    pub fn block(&self) -> (u32, u32) {
        match self {
            Kernel::Shipped(id, _) => {
                let t = shipped_tile(*id);
                (t.m as u32, t.n as u32)
            }
            Kernel::Template(_, t) => (t.bm(), t.bn()),
        }
    }

    /// What K must be a multiple of: the K step, or 16 with a K tail.
    pub fn k_step(&self) -> u32 {
        match self {
            Kernel::Shipped(id, _) => shipped_tile(*id).k as u32,
            Kernel::Template(_, t) if t.k_tail() => 16,
            Kernel::Template(_, t) => t.tk,
        }
    }

    /// Whether it handles M and N that are not multiples of its block.
    pub fn ragged(&self) -> bool {
        !matches!(self, Kernel::Template(_, Tiling { direct: true, .. }))
    }

    /// What it binds: (binding, buffer).
    pub fn bindings(&self) -> &'static [(u32, Binding)] {
        use Binding::*;
        match self {
            Kernel::Shipped(q4_shipped!(), p) if p.0 & Patch::NO_BIAS != 0 => {
                &[(0, Params), (1, X), (2, W), (3, Scales), (5, Out)]
            }
            Kernel::Shipped(q4_shipped!(), _) => &[(0, Params), (1, X), (2, W), (3, Scales), (4, Bias), (5, Out)],
            Kernel::Shipped(..) => &[(0, Params), (1, X), (2, W), (3, Bias), (4, Out)],
            Kernel::Template(Weights::Q4, _) => &[(0, Params), (1, X), (2, W), (3, Scales), (4, Out)],
            Kernel::Template(Weights::Dense, _) => &[(0, Params), (1, X), (2, W), (4, Out)],
        }
    }

    /// Workgroup memory it declares, in bytes.
    pub fn workgroup_bytes(&self) -> u32 {
        match self {
            Kernel::Shipped(id, _) => id.needs().workgroup_bytes,
            Kernel::Template(_, t) => t.workgroup_bytes(),
        }
    }

    /// The uniform words for an `m x n x k` product (`tiles_n` workgroups
    /// along N, group size 32, no bias, word-major 4-bit weights).
    pub fn params(&self, m: u32, n: u32, k: u32) -> [u32; 8] {
        let tiles_n = n.div_ceil(self.block().1);
        match self {
            Kernel::Shipped(q4_shipped!(), _) => [m, n, k, n, 32, 0, tiles_n, 1],
            Kernel::Shipped(..) => [m, n, k, 0, tiles_n, 0, 0, 0],
            Kernel::Template(..) => [m, n, k, n, 32, tiles_n, 0, 0],
        }
    }

    pub fn source(&self) -> String {
        match self {
            Kernel::Shipped(id, patch) => patch.apply(id.source()),
            Kernel::Template(weights, t) => fill(*weights, t),
        }
    }
}

/// The tile of a shipped kernel, as its host rule
/// (`etwgpu_kernels::ops::gemm`) dispatches it.
pub fn shipped_tile(id: ShaderId) -> CoopTile {
    match id {
        ShaderId::Q4GemmCoopF16 | ShaderId::Q4GemmCoopF32 | ShaderId::Q4GemmCoopSwigluF16 | ShaderId::MatmulCoopF16 => {
            COOP_SMALL
        }
        ShaderId::Q4GemmCoopLargeF16 | ShaderId::Q4GemmCoopLargeF32 => COOP_Q4_LARGE,
        ShaderId::Q4GemmCoopSwigluLargeF16 => COOP_SWIGLU_LARGE,
        ShaderId::MatmulCoopLargeF16 => COOP_DENSE_LARGE,
        _ => panic!("{} is not a cooperative-matrix GEMM", id.label()),
    }
}

/// Parses and validates `source` with naga (every capability on, as
/// `xtask check-wgsl`), and checks that every A and B fragment type is f16:
/// naga 30 takes a loaded fragment's element type from the pointer
/// (`coopLoad<coop_mat16x16<f16, A>>` through a `u32` pointer is a u32
/// fragment) and its validator accepts a multiply-add of such fragments.
pub fn validate(source: &str) -> Result<(naga::Module, naga::valid::ModuleInfo), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| e.emit_to_string(source))?;
    for (_, ty) in module.types.iter() {
        if let naga::TypeInner::CooperativeMatrix { scalar, role, .. } = ty.inner
            && role != naga::CooperativeRole::C
            && scalar != naga::Scalar::F16
        {
            return Err(format!("a {role:?} fragment of {scalar:?}, not f16"));
        }
    }
    Ok((module, info))
}

/// How much runtime checking a module gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checks {
    /// `create_shader_module`: index clamps and the loop guard.
    Full,
    /// As `runtime::pipeline_cache` makes modules: index clamps, no loop
    /// guard.
    Runtime,
    /// `create_shader_module_trusted` with every check off.
    Off,
}

impl Checks {
    pub fn name(self) -> &'static str {
        match self {
            Checks::Full => "full",
            Checks::Runtime => "runtime",
            Checks::Off => "off",
        }
    }

    pub fn wgpu(self) -> wgpu::ShaderRuntimeChecks {
        match self {
            Checks::Full => wgpu::ShaderRuntimeChecks::checked(),
            Checks::Runtime => {
                let mut c = wgpu::ShaderRuntimeChecks::checked();
                c.force_loop_bounding = false;
                c
            }
            Checks::Off => wgpu::ShaderRuntimeChecks::unchecked(),
        }
    }
}

/// The SPIR-V wgpu-hal's Vulkan backend writes for `module` on a device
/// with `robustBufferAccess2` (NVIDIA): buffer indices unchecked (the
/// driver bounds them), other indices clamped, the loop guard and integer
/// division checks on, SPIR-V 1.6; with `checks` applied as wgpu applies
/// them.
pub fn spirv(module: &naga::Module, info: &naga::valid::ModuleInfo, checks: Checks) -> Result<Vec<u32>, String> {
    use naga::proc::{BoundsCheckPolicies, BoundsCheckPolicy as P};
    let on = checks != Checks::Off;
    let options = naga::back::spv::Options {
        lang_version: (1, 6),
        flags: naga::back::spv::WriterFlags::LABEL_VARYINGS,
        bounds_check_policies: BoundsCheckPolicies {
            index: if on { P::Restrict } else { P::Unchecked },
            buffer: P::Unchecked,
            image_load: P::Unchecked,
            binding_array: P::Unchecked,
        },
        zero_initialize_workgroup_memory: naga::back::spv::ZeroInitializeWorkgroupMemoryMode::Native,
        force_loop_bounding: checks == Checks::Full,
        emit_int_div_checks: on,
        ..naga::back::spv::Options::default()
    };
    let pipeline =
        naga::back::spv::PipelineOptions { entry_point: "main".into(), shader_stage: naga::ShaderStage::Compute };
    naga::back::spv::write_vec(module, info, &options, Some(&pipeline)).map_err(|e| e.to_string())
}
