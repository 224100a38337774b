//! What the device offers the kernel routes (the GEMMs' cooperative
//! matrices, the decode attention's subgroups) and which routes the user
//! forces (the convolutions' kernel), as plain data: the runtime
//! fills a [`DeviceCaps`] from the adapter and the load options, and hands
//! it to every host rule through [`crate::plan::Ctx::with_caps`]. Rules
//! never see a GPU; without caps (the default) they take the portable
//! routes.

/// Which float32 matrix products may round their operands to f16 on the
/// cooperative matrices (accumulating in f32). Float16 programs use the
/// matrix units at every setting; on a device without them (lavapipe, so
/// CI) every setting computes the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Float32 everywhere; every float32 matrix product, the 4-bit weight
    /// linears included, stays on the f32 kernels (`--precision f32`,
    /// `ETWGPU_PRECISION=f32`).
    F32,
    /// The 4-bit weight linears ([`Product::Q4Weight`]: plain, the fused
    /// SwiGLU pair and the fused QKV projections) may take f16 operands,
    /// whose weights are already 4-bit, and so may prompt attention over a
    /// float16 KV cache ([`Product::Attention`]); dense float32 products
    /// ([`Product::Dense`]: `aten.linear`, matmul, convolution) stay
    /// float32 (`--precision mixed`). **The default** since run ay (H100):
    /// the SmolLM2 4-bit export agrees with eager on the top-1 token at
    /// 960 of 960 teacher-forced positions at this setting (958 in
    /// float32), over the 99% issue 15 sets for f16 operands by default;
    /// the fast prefill of 4-bit LLMs.
    #[default]
    Mixed,
    /// Every float32 matrix product (dense and 4-bit weight linears) may
    /// round its operands to f16 (opt-in: `--precision f16`,
    /// `ETWGPU_PRECISION=f16`; its own tolerance rows in the fixtures).
    F16,
}

/// The setting of `all` named `name`; `None` for any other string (the
/// lookup of [`Precision::from_name`] and [`ConvKernels::from_name`]).
fn named<T: Copy>(all: &[(&'static str, T)], name: &str) -> Option<T> {
    all.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

impl Precision {
    /// Every setting with its name, in the order the docs list them.
    pub const ALL: [(&'static str, Precision); 3] =
        [("f32", Precision::F32), ("mixed", Precision::Mixed), ("f16", Precision::F16)];

    /// The names accepted by [`Precision::from_name`], for error messages.
    pub const ACCEPTED: &'static str = "f32, mixed or f16";

    /// The setting named `name` (`f32`, `mixed` or `f16`, as the CLI's
    /// `--precision` and `ETWGPU_PRECISION` take them); `None` for any
    /// other string.
    pub fn from_name(name: &str) -> Option<Precision> {
        named(&Self::ALL, name)
    }

    /// The name [`Precision::from_name`] takes for `self`.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, p)| *p == self).map_or("f32", |(n, _)| n)
    }

    /// Whether a float32 product of `kind` may take f16 operands.
    fn allows_f16_operands(self, kind: Product) -> bool {
        match self {
            Precision::F32 => false,
            Precision::Mixed => matches!(kind, Product::Q4Weight | Product::Attention),
            Precision::F16 => true,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The kind of matrix product a route computes, as [`Precision`] tells
/// them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Product {
    /// Activations times 4-bit group-quantized weights (`q4gsw` linears,
    /// their fused SwiGLU and QKV forms).
    Q4Weight,
    /// Activations times dense weights or another activation (`aten.linear`,
    /// matmul, convolution).
    Dense,
    /// Prompt attention over a float16 KV cache (`sdpa_prefill_coop.wgsl`):
    /// the keys and values are f16 already; the query and the softmax
    /// probabilities are rounded to f16 on the matrix units, the scores
    /// and the output accumulate in f32. At [`Precision::Mixed`] and
    /// [`Precision::F16`] for float32 programs (both opt-in).
    Attention,
}

/// Which kernel 2-D convolutions take
/// ([`crate::ops::conv_routes::conv_route`]): the implicit GEMM
/// (`conv_gemm.wgsl`, or `conv_gemm_coop.wgsl` on cooperative matrices) or
/// the direct kernel (`conv.wgsl`, one invocation an output element).
/// Grouped, depthwise and transposed convolutions take the direct kernel
/// at every setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ConvKernels {
    /// The default: the implicit GEMM for convolutions with enough output
    /// channels and inputs per output to fill its tiles (on cooperative
    /// matrices where they may take f16 operands and the layer is not both
    /// narrow and large; see `conv_route`), the direct kernel for the rest
    /// (`ETWGPU_CONV=auto` or unset).
    #[default]
    Auto,
    /// The direct kernel for every convolution, as before the implicit
    /// GEMM (`ETWGPU_CONV=direct`): the A/B baseline.
    Direct,
    /// The implicit GEMM for every convolution it can compute, whatever
    /// its size (`ETWGPU_CONV=gemm`): tests run it on small shapes.
    Gemm,
}

impl ConvKernels {
    /// Every setting with its name.
    pub const ALL: [(&'static str, ConvKernels); 3] =
        [("auto", ConvKernels::Auto), ("direct", ConvKernels::Direct), ("gemm", ConvKernels::Gemm)];

    /// The names accepted by [`ConvKernels::from_name`], for error messages.
    pub const ACCEPTED: &'static str = "auto, direct or gemm";

    /// The setting named `name`; `None` for any other string.
    pub fn from_name(name: &str) -> Option<ConvKernels> {
        named(&Self::ALL, name)
    }
}

/// The subgroup sizes a device may run a shader with (Vulkan: every power
/// of two from `min` to `max`; lavapipe 8, NVIDIA 32, AMD 32 or 64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubgroupSizes {
    /// The smallest.
    pub min: u32,
    /// The largest.
    pub max: u32,
}

/// What the device offers the kernel routes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct DeviceCaps {
    /// The device was opened with cooperative matrices of 16 x 16 x 16
    /// f16 operands and f32 accumulation, and its subgroups have 32
    /// invocations (what the cooperative-matrix kernels assume).
    pub coop_matrix_f16: bool,
    /// Which float32 products may use f16 operands there.
    pub precision: Precision,
    /// The device was opened with subgroup operations (`wgpu`'s
    /// `SUBGROUP`), of these sizes; `None` without them or with them
    /// switched off (`ETWGPU_SUBGROUPS=0`, `LoadOptions::subgroups`). The
    /// split-KV decode attention takes its subgroup form where this allows
    /// (`ops::llm`'s `split_route`).
    pub subgroups: Option<SubgroupSizes>,
    /// Prompt attention on the cooperative matrices
    /// (`sdpa_prefill_coop.wgsl`) is allowed where the precision lets the
    /// query take f16 operands ([`Product::Attention`]). The runtime sets it
    /// on devices with matrix units unless `ETWGPU_COOP_ATTENTION=0`
    /// (`RuntimeOptions::coop_attention_off`). It was off until run al
    /// found why the kernel was wrong on the H200 (a 4-byte workgroup
    /// variable; see the kernel's `flag`).
    pub coop_attention: bool,
    /// Which kernel 2-D convolutions take.
    pub conv: ConvKernels,
    /// The decode O projection's 4-bit GEMV may compute a short cache's
    /// whole attention itself (`q4_gemv_sdpa.wgsl`, one dispatch for the
    /// attention and the projection) at every position: the device allows
    /// the 11 storage buffers per shader stage that kernel binds (the
    /// runtime's caps) and the load asks for it (a load's caps; see the
    /// runtime's `LoadOptions::gemv_attention`).
    pub gemv_attention: bool,
    /// The same route while the live context (the keys a decode row
    /// attends to) is at most this many keys, the split route past it; 0:
    /// never. The runtime sets
    /// [`GEMV_ATTN_AUTO_KEYS`](crate::GEMV_ATTN_AUTO_KEYS) where the device
    /// allows the kernel and the load does not say otherwise.
    pub gemv_attention_keys: u32,
    /// One-row 4-bit GEMVs may round their input row to int8 per 32-input
    /// block and take each weight word's dot in integers
    /// (`q4_gemv_i8.wgsl`, the `_i8` forms of the normed SwiGLU and QKV
    /// GEMVs and of the combine folded into the O projection; opt-in: the
    /// runtime's `LoadOptions::int8_activations`). It changes the numbers
    /// (x's rounding to 8 bits a block, as llama.cpp's `q8_1`
    /// activations), so it is off by default for every program.
    pub int8_activations: bool,
}

impl DeviceCaps {
    /// Whether a matrix product of `kind` over operands of `f16_input`
    /// (else float32) may take the cooperative-matrix routes.
    pub fn coop(&self, f16_input: bool, kind: Product) -> bool {
        self.coop_matrix_f16 && (f16_input || self.precision.allows_f16_operands(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_and_kind_of_product_decide_the_route() {
        use Precision::{F16, F32, Mixed};
        use Product::{Attention, Dense, Q4Weight};
        // (precision, f16 input, kind) -> cooperative-matrix route, on a
        // device with matrix units.
        let table = [
            (F32, false, Q4Weight, false),
            (F32, false, Dense, false),
            (F32, true, Q4Weight, true),
            (F32, true, Dense, true),
            (Mixed, false, Q4Weight, true),
            (Mixed, false, Dense, false),
            (Mixed, true, Q4Weight, true),
            (Mixed, true, Dense, true),
            (Mixed, false, Attention, true),
            (F32, false, Attention, false),
            (F16, false, Attention, true),
            (F16, false, Q4Weight, true),
            (F16, false, Dense, true),
            (F16, true, Q4Weight, true),
            (F16, true, Dense, true),
        ];
        for (precision, f16_input, kind, want) in table {
            let on = DeviceCaps { coop_matrix_f16: true, precision, ..DeviceCaps::default() };
            assert_eq!(on.coop(f16_input, kind), want, "{precision} f16_input={f16_input} {kind:?}");
            // Without matrix units (lavapipe, CI): never, at any setting.
            let off = DeviceCaps { coop_matrix_f16: false, precision, ..DeviceCaps::default() };
            assert!(!off.coop(f16_input, kind), "{precision} f16_input={f16_input} {kind:?} without matrix units");
        }
    }

    #[test]
    fn the_default_is_mixed_and_names_round_trip() {
        assert_eq!(Precision::default(), Precision::Mixed);
        assert_eq!(
            DeviceCaps::default(),
            DeviceCaps {
                coop_matrix_f16: false,
                precision: Precision::Mixed,
                subgroups: None,
                coop_attention: false,
                conv: ConvKernels::Auto,
                gemv_attention: false,
                gemv_attention_keys: 0,
                int8_activations: false,
            }
        );
        for (name, k) in ConvKernels::ALL {
            assert_eq!(ConvKernels::from_name(name), Some(k));
            assert!(ConvKernels::ACCEPTED.contains(name));
        }
        assert_eq!(ConvKernels::from_name("Direct"), None);
        for (name, p) in Precision::ALL {
            assert_eq!(Precision::from_name(name), Some(p));
            assert_eq!(p.name(), name);
            assert_eq!(p.to_string(), name);
            assert!(Precision::ACCEPTED.contains(name));
        }
        for bad in ["", "F32", "fp16", "bf16", "f16 ", "half"] {
            assert_eq!(Precision::from_name(bad), None, "{bad:?}");
        }
    }
}
