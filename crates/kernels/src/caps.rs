//! What the device offers the kernel routes (the GEMMs' cooperative
//! matrices, the decode attention's subgroups), as plain data: the runtime
//! fills a [`DeviceCaps`] from the adapter and the load options, and hands
//! it to every host rule through [`crate::plan::Ctx::with_caps`]. Rules
//! never see a GPU; without caps (the default) they take the portable
//! routes.

/// Whether float32 programs may use f16 operands (with f32 accumulation)
/// on cooperative matrices. Float16 programs use them either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Float32 programs keep float32 numerics (the default): their matrix
    /// products, the 4-bit weight linears included, stay on the f32
    /// kernels.
    #[default]
    F32,
    /// Float32 programs' matrix products (dense and 4-bit weight linears)
    /// may round their operands to f16 on the matrix units (opt-in:
    /// `--precision f16`, `ETWGPU_PRECISION=f16`).
    F16,
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
    /// Whether float32 products may use f16 operands there.
    pub precision: Precision,
    /// The device was opened with subgroup operations (`wgpu`'s
    /// `SUBGROUP`), of these sizes; `None` without them or with them
    /// switched off (`ETWGPU_SUBGROUPS=0`, `LoadOptions::subgroups`). The
    /// split-KV decode attention takes its subgroup form where this allows
    /// (`ops::llm`'s `split_route`).
    pub subgroups: Option<SubgroupSizes>,
}

impl DeviceCaps {
    /// Whether a matrix product over operands of `f16_input` (else
    /// float32) may take the cooperative-matrix routes.
    pub fn coop(&self, f16_input: bool) -> bool {
        self.coop_matrix_f16 && (f16_input || self.precision == Precision::F16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_decides_whether_float32_products_use_f16_operands() {
        let on = |precision| DeviceCaps { coop_matrix_f16: true, precision, ..DeviceCaps::default() };
        assert!(!DeviceCaps::default().coop(true), "no matrix units: never");
        assert!(!DeviceCaps { precision: Precision::F16, ..DeviceCaps::default() }.coop(false));
        assert!(!on(Precision::F32).coop(false), "float32 keeps float32 by default");
        assert!(on(Precision::F16).coop(false), "opt-in");
        assert!(on(Precision::F32).coop(true) && on(Precision::F16).coop(true), "float16 programs always");
    }
}
