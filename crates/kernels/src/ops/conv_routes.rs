//! The kernels of a 2-D convolution (decoded by `conv.rs`) and the one
//! place that chooses between them ([`conv_route`], from the call's shape
//! and [`DeviceCaps`]): the implicit GEMM (`conv_gemm.wgsl`: the
//! output pixels `N * OH * OW` as the rows of a product with the weight
//! `[OC, C * KH * KW]`, the input patches gathered as they are staged),
//! the same product on cooperative matrices (`conv_gemm_coop.wgsl`, f16
//! operands where the device has them and the precision allows) and
//! the direct kernel (`conv.wgsl`: one invocation an output element; also
//! grouped, depthwise and transposed convolutions).

use crate::caps::{ConvKernels, DeviceCaps, Product};
use crate::error::Result;
use crate::generated::shaders::Family;
use crate::ops::fused::Epilogue;
use crate::ops::gemm::{COOP_SMS, SPLIT_K_MAX, SPLIT_K_SCRATCH, split_k};
use crate::plan::{
    Ctx, Dispatch, ElemType, Step, TensorInfo, Uniform, Vid, WG_ELEMENTWISE, WG_ROWS, float_shader, grid_1d,
    grid_groups, to_u32,
};

/// Output rows (pixels) and columns (channels) per workgroup of
/// `conv_gemm.wgsl`.
pub const CONV_GEMM_TILE: u64 = 64;
/// Inputs per step along K of `conv_gemm.wgsl`.
pub const CONV_GEMM_TK: u64 = 16;

/// Fewest output channels the [`ConvKernels::Auto`] setting sends to the
/// implicit GEMM: its tiles are 64 channels wide, and at 16 a quarter of
/// their columns is useful work. Its inner loop does a multiply-add per
/// ~1.25 instructions (two `vec4` loads from workgroup memory feed 16),
/// the direct kernel one per ~8 (two loads from global memory, bounds
/// checks and index arithmetic per input), so below a quarter of a tile
/// (an image head of 3 channels: 3 / 64) the direct kernel does less.
pub const CONV_GEMM_MIN_CHANNELS: u64 = 16;
/// Fewest inputs per output (`C * KH * KW`) the [`ConvKernels::Auto`]
/// setting sends to the implicit GEMM: one full step along K (fewer pad
/// the step with zeros, e.g. a 1x1 convolution of 3 channels, whose
/// direct kernel reads 3 inputs an output).
pub const CONV_GEMM_MIN_INPUTS: u64 = CONV_GEMM_TK;
/// Fewest output channels a convolution takes the matrix units with at
/// [`ConvKernels::Auto`] when it has more than
/// [`CONV_COOP_NARROW_MAX_PIXELS`] output pixels. Measured on an H100 (run
/// ax, the gemm bench's ResNet-18 layers, µs an op, float32 implicit GEMM /
/// `conv_gemm_coop`): with 64 channels a gathered patch value feeds the
/// fewest products and the gather bounds both kernels, and the float32 one
/// did less per value (3x3 64 channels at batch 8, 25,088 pixels: 118.6 /
/// 161.4; the 7x7 stem of 3 -> 64 at batch 1 and 8: 42.8 / 102.6 and 435.3
/// / 455.3); from 128 channels the matrix units led at every size (batch
/// 8: 139.4 / 89.9 to 287.8 / 84.2).
pub const CONV_COOP_MIN_CHANNELS: u64 = 128;
/// Most output pixels a convolution under [`CONV_COOP_MIN_CHANNELS`]
/// channels takes the matrix units with at [`ConvKernels::Auto`]: the
/// 64-channel 3x3 layer at batch 1 (3,136 pixels) ran faster there (run
/// ax: 56.6 / 48.3 µs), the same layer at batch 8 and the stem (12,544
/// pixels at batch 1) did not.
pub const CONV_COOP_NARROW_MAX_PIXELS: u64 = 4096;

/// Output pixels and channels per workgroup of `conv_gemm_coop.wgsl`.
pub const CONV_COOP_TILE: [u64; 2] = [128, 64];
/// Inputs per step along K of `conv_gemm_coop.wgsl`.
pub const CONV_COOP_TK: u64 = 32;

/// A 2-D convolution's geometry (1-D as `h = 1`), as `conv.rs` decoded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvGeom {
    /// Batch.
    pub n: u64,
    /// Input channels.
    pub c_in: u64,
    /// Input height.
    pub h: u64,
    /// Input width.
    pub w: u64,
    /// Output channels.
    pub c_out: u64,
    /// Output height.
    pub oh: u64,
    /// Output width.
    pub ow: u64,
    /// Kernel height.
    pub kh: u64,
    /// Kernel width.
    pub kw: u64,
    /// Stride (height, width).
    pub stride: [u64; 2],
    /// Padding (height, width).
    pub padding: [u64; 2],
    /// Dilation (height, width).
    pub dilation: [u64; 2],
    /// Groups (1: every output channel reads every input channel).
    pub groups: u64,
    /// A transposed convolution (weight `[C, OC / groups, KH, KW]`).
    pub transposed: bool,
}

impl ConvGeom {
    /// Rows of the implicit product: output pixels.
    pub fn m(&self) -> u64 {
        self.n * self.oh * self.ow
    }

    /// Inputs per output: the product's K.
    pub fn k(&self) -> u64 {
        self.c_in / self.groups.max(1) * self.kh * self.kw
    }
}

/// The kernel a convolution takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvRoute {
    /// `conv.wgsl`: one invocation an output element.
    Direct,
    /// `conv_gemm.wgsl`: the implicit GEMM.
    Gemm,
    /// `conv_gemm_coop.wgsl`: the implicit GEMM on cooperative matrices.
    Coop,
}

/// The one place a convolution's kernel is chosen. Ungrouped,
/// untransposed convolutions take an implicit GEMM: at
/// [`ConvKernels::Auto`] those with at least [`CONV_GEMM_MIN_CHANNELS`]
/// output channels and [`CONV_GEMM_MIN_INPUTS`] inputs an output (the
/// float32 implicit GEMM ran ahead of the direct kernel on every measured
/// layer, run ax: 1.6x on the batch-8 stem to 5.9x on batch 1's 7x7
/// layer), at [`ConvKernels::Gemm`] all of them. The implicit GEMM runs on
/// cooperative matrices where the device has them and `f16_input` or the
/// precision lets a dense product take f16 operands ([`DeviceCaps::coop`]):
/// always at `gemm`, and at `auto` unless the layer is narrow and large
/// (under [`CONV_COOP_MIN_CHANNELS`] channels and over
/// [`CONV_COOP_NARROW_MAX_PIXELS`] pixels). The rest, and everything at
/// [`ConvKernels::Direct`], take the direct kernel.
pub fn conv_route(caps: &DeviceCaps, g: &ConvGeom, f16_input: bool) -> ConvRoute {
    let gemm_can = g.groups == 1 && !g.transposed;
    let fills = g.c_out >= CONV_GEMM_MIN_CHANNELS && g.k() >= CONV_GEMM_MIN_INPUTS;
    let coop = gemm_can && caps.coop(f16_input, Product::Dense);
    let coop_leads = g.c_out >= CONV_COOP_MIN_CHANNELS || g.m() <= CONV_COOP_NARROW_MAX_PIXELS;
    match caps.conv {
        ConvKernels::Direct => ConvRoute::Direct,
        ConvKernels::Gemm if coop => ConvRoute::Coop,
        ConvKernels::Gemm if gemm_can => ConvRoute::Gemm,
        ConvKernels::Auto if coop && fills && coop_leads => ConvRoute::Coop,
        ConvKernels::Auto if gemm_can && fills => ConvRoute::Gemm,
        _ => ConvRoute::Direct,
    }
}

/// The epilogue of a convolution: bias, clamp bounds (`conv_with_clamp`)
/// and activation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvEpilogue {
    /// A bias of one value an output channel is added.
    pub has_bias: bool,
    /// Lower clamp bound.
    pub out_min: Option<f32>,
    /// Upper clamp bound.
    pub out_max: Option<f32>,
    /// The activation after the clamp.
    pub act: Epilogue,
}

/// Scratch bytes the split-K partial sums of a float32 convolution of
/// `numel` output elements may use: `splits x numel` f32, at most
/// [`SPLIT_K_MAX`] splits, and (the splits times the output tiles being
/// at most [`COOP_SMS`]) at most that many tiles of the larger kernel's
/// (`conv_gemm_coop.wgsl`'s 128 x 64). Non-decreasing in `numel`, so the
/// lowering at the maximum shapes sizes it.
pub fn split_scratch_bytes(numel: u64) -> u64 {
    4 * (SPLIT_K_MAX * numel).min(COOP_SMS * CONV_COOP_TILE[0] * CONV_COOP_TILE[1])
}

/// The implicit-GEMM steps of a convolution [`conv_route`] sent to
/// `conv_gemm.wgsl` or, `coop`, to `conv_gemm_coop.wgsl` (non-empty
/// output; inputs `[x, weight, bias or weight]`): one dispatch, or, for a
/// float32 program whose output tiles leave SMs idle (`gemm.rs`'s
/// [`split_k`] rule, as the 4-bit linears split: ResNet-18's 7x7 and
/// 14x14 layers at batch 1, 8 and 16 tiles of 64 x 64) and a scratch
/// given, its split-K form and `conv_gemm_combine.wgsl`. Float32 programs
/// declare the scratch at every lowering.
pub fn gemm_steps(
    c: &Ctx<'_>,
    x: &TensorInfo<'_>,
    g: &ConvGeom,
    e: &ConvEpilogue,
    inputs: Vec<Vid>,
    out: Vid,
    coop: bool,
) -> Result<Vec<Step>> {
    let u = to_u32;
    let (m, k) = (g.m(), g.k());
    let numel = m * g.c_out;
    let khw = g.kh * g.kw;
    let (family, [tile_m, tile_n], step) = if coop {
        (Family::ConvGemmCoop, CONV_COOP_TILE, CONV_COOP_TK)
    } else {
        (Family::ConvGemm, [CONV_GEMM_TILE; 2], CONV_GEMM_TK)
    };
    let tiles_n = g.c_out.div_ceil(tile_n);
    let tiles = m.div_ceil(tile_m) * tiles_n;
    let rem = step % khw;
    // The whole input and weight must be addressable in 32 bits, as the
    // kernel does; so must its walk along K, which passes K by a step.
    u("input elements", g.n * g.c_in * g.h * g.w)?;
    u("weight elements", g.c_out * k)?;
    u("inputs per output", k + 2 * step)?;
    let f32_program = x.dtype == ElemType::F32;
    let mut steps = Vec::new();
    if f32_program {
        steps.push(Step::Scratch { slot: SPLIT_K_SCRATCH, bytes: split_scratch_bytes(numel) });
    }
    let split = split_k(tiles, k.next_multiple_of(step), step);
    let scratch = c
        .scratch(SPLIT_K_SCRATCH)
        .filter(|_| f32_program && split.splits > 1 && 4 * split.splits * numel <= split_scratch_bytes(numel));
    let splits = if scratch.is_some() { split.splits } else { 1 };
    let params = Uniform::new()
        .u32(u("output pixels", m)?)
        .u32(u("output channels", g.c_out)?)
        .u32(u("inputs per output", k)?)
        .u32(u("tiles along N", tiles_n)?)
        .u32(u("channels", g.c_in)?)
        .u32(u("height", g.h)?)
        .u32(u("width", g.w)?)
        .u32(u("output height", g.oh)?)
        .u32(u("output width", g.ow)?)
        .u32(u("kernel height", g.kh)?)
        .u32(u("kernel width", g.kw)?)
        .u32(u("stride", g.stride[0])?)
        .u32(u("stride", g.stride[1])?)
        .u32(u("padding", g.padding[0])?)
        .u32(u("padding", g.padding[1])?)
        .u32(u("dilation", g.dilation[0])?)
        .u32(u("dilation", g.dilation[1])?)
        .u32(u("channel step", step / khw)?)
        .u32(u("kernel row step", rem / g.kw)?)
        .u32(u("kernel column step", rem % g.kw)?)
        .u32(u32::from(e.has_bias))
        .u32(u32::from(e.out_min.is_some()))
        .u32(u32::from(e.out_max.is_some()))
        .u32(e.act.op as u32)
        .f32(e.out_min.unwrap_or(0.0))
        .f32(e.out_max.unwrap_or(0.0))
        .f32(e.act.p0)
        .f32(e.act.p1)
        .u32(u("tiles", tiles)?)
        .u32(u("inputs per split", if splits > 1 { split.k_chunk } else { k })?)
        .u32(u32::from(splits > 1))
        .finish();
    let gemm = |outputs| -> Result<Step> {
        Ok(Step::Dispatch(Dispatch {
            shader: float_shader(family, x, 0, "input")?.into(),
            entry: "main",
            inputs: inputs.clone(),
            outputs,
            params: params.clone(),
            workgroups: grid_groups(splits * tiles)?,
        }))
    };
    let Some(scratch) = scratch else {
        steps.push(gemm(vec![out])?);
        return Ok(steps);
    };
    steps.push(gemm(vec![scratch])?);
    let combine = Uniform::new()
        .u32(u("output elements", numel)?)
        .u32(u("output pixels a plane", g.oh * g.ow)?)
        .u32(u("output channels", g.c_out)?)
        .u32(u("splits", splits)?)
        .u32(u32::from(e.has_bias))
        .u32(u32::from(e.out_min.is_some()))
        .u32(u32::from(e.out_max.is_some()))
        .u32(e.act.op as u32)
        .f32(e.out_min.unwrap_or(0.0))
        .f32(e.out_max.unwrap_or(0.0))
        .f32(e.act.p0)
        .f32(e.act.p1)
        .finish();
    steps.push(Step::Dispatch(Dispatch {
        shader: float_shader(Family::ConvGemmCombine, x, 0, "input")?.into(),
        entry: "main",
        inputs: vec![scratch, inputs[2]],
        outputs: vec![out],
        params: combine,
        workgroups: grid_1d(numel, WG_ELEMENTWISE)?,
    }));
    Ok(steps)
}

/// The direct dispatch (`conv.wgsl`) of a convolution of `numel` output
/// elements; inputs `[x, weight, bias or weight]`.
pub fn direct_dispatch(
    x: &TensorInfo<'_>,
    g: &ConvGeom,
    e: &ConvEpilogue,
    inputs: Vec<Vid>,
    out: Vid,
    numel: u64,
) -> Result<Dispatch> {
    let u = to_u32;
    let params = Uniform::new()
        .u32(u("output elements", numel)?)
        .u32(u("channels", g.c_in)?)
        .u32(u("height", g.h)?)
        .u32(u("width", g.w)?)
        .u32(u("output channels", g.c_out)?)
        .u32(u("output height", g.oh)?)
        .u32(u("output width", g.ow)?)
        .u32(u("groups", g.groups)?)
        .u32(u("kernel height", g.kh)?)
        .u32(u("kernel width", g.kw)?)
        .u32(u("stride", g.stride[0])?)
        .u32(u("stride", g.stride[1])?)
        .u32(u("padding", g.padding[0])?)
        .u32(u("padding", g.padding[1])?)
        .u32(u("dilation", g.dilation[0])?)
        .u32(u("dilation", g.dilation[1])?)
        .u32(u32::from(e.has_bias))
        .u32(u32::from(e.out_min.is_some()))
        .u32(u32::from(e.out_max.is_some()))
        .u32(u32::from(g.transposed))
        .f32(e.out_min.unwrap_or(0.0))
        .f32(e.out_max.unwrap_or(0.0))
        .f32(e.act.p0)
        .f32(e.act.p1)
        .u32(e.act.op as u32)
        .finish();
    Ok(Dispatch {
        shader: float_shader(Family::Conv, x, 0, "input")?.into(),
        entry: "main",
        inputs,
        outputs: vec![out],
        params,
        workgroups: grid_1d(numel, WG_ROWS)?,
    })
}
