//! The operator table: one row per supported ExecuTorch operator, sorted by
//! name. `register_ops!` turns the rows into [`OpId`], [`OPS`] and
//! [`from_name`], and wires each row to its host rule in `ops/<family>.rs`.
//! Rows named `etwgpu.*` are not ExecuTorch operators: the graph's fusion
//! pass writes them (`ops/fused.rs`), and its split of tables past the
//! binding limit the `embedding_rows` ones.

pub mod attention_coop;
pub mod conv;
pub mod conv_routes;
pub mod creation;
pub mod elementwise;
pub mod fused;
pub mod gemm;
pub mod index;
pub mod infra;
pub mod layout;
pub mod llm;
pub mod logic;
pub mod matmul;
pub mod norm;
pub mod q8;
pub mod quant;
pub mod reduce;
pub mod shape;
pub mod symint;
pub mod train;

use crate::error::Result;
use crate::plan::{Ctx, Lowered};
use elementwise::{BinaryOp, UnaryOp};
use logic::{BitOp, CmpOp};
use q8::ConvKind;
use reduce::{ArgOp, ReduceOp};
use symint::SymIntOp;

/// Declares the operator table.
///
/// Each row is `Variant => "exact.executorch.name" => rule`, where `rule`
/// is a `fn(&Ctx<'_>) -> Result<Lowered>` (or a closure), or
/// `@unary Op` for an operator that is exactly the parameterless
/// [`UnaryOp::Op`](UnaryOp) of `unary.wgsl` (its rule is
/// [`elementwise::unary`], and [`OpId::unary`] names it, so fusion and
/// lowering read one row). Rows must be sorted by name (a unit test checks
/// it), so lookups can binary-search.
macro_rules! register_ops {
    ($($variant:ident => $name:literal => $(@unary $unary:ident)? $($lower:expr)?),* $(,)?) => {
        /// A supported operator.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpId {
            $(#[doc = $name] $variant,)*
        }

        /// Every supported operator with its ExecuTorch name, sorted by name.
        ///
        /// ```
        /// use etwgpu_kernels::{OPS, OpId};
        ///
        /// assert!(OPS.windows(2).all(|w| w[0].1 < w[1].1));
        /// let q4: Vec<&str> = OPS.iter().map(|(_, n)| *n).filter(|n| n.contains("q4gsw")).collect();
        /// assert!(q4.contains(&"et_vk.linear_q4gsw.default"));
        /// assert!(OPS.contains(&(OpId::Mm, "aten.mm.default")));
        /// ```
        pub const OPS: &[(OpId, &str)] = &[$((OpId::$variant, $name),)*];

        impl OpId {
            /// The exact ExecuTorch name.
            pub const fn name(self) -> &'static str {
                match self {
                    $(OpId::$variant => $name,)*
                }
            }

            /// Runs the host rule: decodes the arguments (ids in schema
            /// order, outputs last), infers the output shapes and says what
            /// to dispatch.
            pub fn lower(self, ctx: &Ctx<'_>) -> Result<Lowered> {
                match self {
                    $(OpId::$variant => row_rule!($($unary)?; $($lower)?)(ctx),)*
                }
            }

            /// The [`UnaryOp`] this operator is, when it is exactly one
            /// parameterless op of `unary.wgsl` (`aten.relu.default` is
            /// [`UnaryOp::Relu`]); `None` for every other operator,
            /// including the unary ones whose function or parameters come
            /// from their arguments (`gelu`'s `approximate`, `clamp`'s
            /// bounds, `leaky_relu`, `hardtanh`, `pow.Tensor_Scalar`).
            ///
            /// ```
            /// use etwgpu_kernels::OpId;
            /// use etwgpu_kernels::ops::elementwise::UnaryOp;
            ///
            /// assert_eq!(OpId::Relu.unary(), Some(UnaryOp::Relu));
            /// assert_eq!(OpId::Mm.unary(), None);
            /// ```
            pub const fn unary(self) -> Option<UnaryOp> {
                match self {
                    $(OpId::$variant => row_unary!($($unary)?),)*
                }
            }
        }
    };
}

/// The rule of one [`register_ops!`] row: its closure or function, or
/// [`elementwise::unary`] for an `@unary` row.
macro_rules! row_rule {
    ($unary:ident;) => {
        (|c: &Ctx<'_>| elementwise::unary(c, UnaryOp::$unary))
    };
    (; $lower:expr) => {
        ($lower)
    };
}

/// What [`OpId::unary`] says of one [`register_ops!`] row.
macro_rules! row_unary {
    () => {
        None
    };
    ($unary:ident) => {
        Some(UnaryOp::$unary)
    };
}

register_ops! {
    SymAdd => "add" => |c| symint::arith(c, SymIntOp::Add),
    LogSoftmax => "aten._log_softmax.default" => |c| norm::softmax(c, true),
    BatchNormNoTraining => "aten._native_batch_norm_legit_no_training.default" => norm::batch_norm_no_training,
    Softmax => "aten._softmax.default" => |c| norm::softmax(c, false),
    ToCopy => "aten._to_copy.default" => shape::to_dim_order_copy,
    WeightInt8packMm => "aten._weight_int8pack_mm.default" => |c| q8::weight_only_linear(c, 8),
    Abs => "aten.abs.default" => @unary Abs,
    Add => "aten.add.Tensor" => |c| elementwise::binary(c, BinaryOp::Add),
    Addmm => "aten.addmm.default" => matmul::addmm,
    AliasCopy => "aten.alias_copy.default" => shape::alias_copy,
    Amax => "aten.amax.default" => |c| reduce::reduce(c, ReduceOp::Amax),
    Amin => "aten.amin.default" => |c| reduce::reduce(c, ReduceOp::Amin),
    Arange => "aten.arange.start_step" => creation::arange,
    Argmax => "aten.argmax.default" => |c| reduce::arg_reduce(c, ArgOp::Argmax),
    Argmin => "aten.argmin.default" => |c| reduce::arg_reduce(c, ArgOp::Argmin),
    AvgPool2d => "aten.avg_pool2d.default" => conv::avg_pool2d,
    BitwiseAnd => "aten.bitwise_and.Tensor" => |c| logic::bitwise(c, BitOp::And),
    BitwiseNot => "aten.bitwise_not.default" => logic::bitwise_not,
    BitwiseOr => "aten.bitwise_or.Tensor" => |c| logic::bitwise(c, BitOp::Or),
    BitwiseXor => "aten.bitwise_xor.Tensor" => |c| logic::bitwise(c, BitOp::Xor),
    Bmm => "aten.bmm.default" => matmul::bmm,
    Cat => "aten.cat.default" => layout::cat,
    Clamp => "aten.clamp.default" => elementwise::clamp,
    Clone => "aten.clone.default" => shape::clone,
    ConstantPadNd => "aten.constant_pad_nd.default" => layout::constant_pad_nd,
    Convolution => "aten.convolution.default" => |c| conv::convolution(c, false),
    Cos => "aten.cos.default" => @unary Cos,
    Div => "aten.div.Tensor" => |c| elementwise::binary(c, BinaryOp::Div),
    DivMode => "aten.div.Tensor_mode" => elementwise::div_mode,
    Embedding => "aten.embedding.default" => index::embedding,
    EqScalar => "aten.eq.Scalar" => |c| logic::compare_scalar(c, CmpOp::Eq),
    EqTensor => "aten.eq.Tensor" => |c| logic::compare_tensor(c, CmpOp::Eq),
    Exp => "aten.exp.default" => @unary Exp,
    ExpandCopy => "aten.expand_copy.default" => shape::expand_copy,
    Flip => "aten.flip.default" => shape::flip,
    Full => "aten.full.default" => creation::full,
    FullLike => "aten.full_like.default" => creation::full_like,
    Gather => "aten.gather.default" => index::gather,
    GeScalar => "aten.ge.Scalar" => |c| logic::compare_scalar(c, CmpOp::Ge),
    GeTensor => "aten.ge.Tensor" => |c| logic::compare_tensor(c, CmpOp::Ge),
    Gelu => "aten.gelu.default" => elementwise::gelu,
    GridSampler2d => "aten.grid_sampler_2d.default" => conv::grid_sampler_2d,
    GtScalar => "aten.gt.Scalar" => |c| logic::compare_scalar(c, CmpOp::Gt),
    GtTensor => "aten.gt.Tensor" => |c| logic::compare_tensor(c, CmpOp::Gt),
    Hardshrink => "aten.hardshrink.default" => elementwise::hardshrink,
    Hardsigmoid => "aten.hardsigmoid.default" => @unary Hardsigmoid,
    Hardswish => "aten.hardswish.default" => @unary Hardswish,
    Hardtanh => "aten.hardtanh.default" => elementwise::hardtanh,
    IndexTensor => "aten.index.Tensor" => index::index_tensor,
    IndexSelect => "aten.index_select.default" => index::index_select,
    LeScalar => "aten.le.Scalar" => |c| logic::compare_scalar(c, CmpOp::Le),
    LeTensor => "aten.le.Tensor" => |c| logic::compare_tensor(c, CmpOp::Le),
    LeakyRelu => "aten.leaky_relu.default" => elementwise::leaky_relu,
    Linear => "aten.linear.default" => matmul::linear,
    Log => "aten.log.default" => @unary Log,
    Log10 => "aten.log10.default" => @unary Log10,
    LogicalAnd => "aten.logical_and.default" => |c| logic::compare_tensor(c, CmpOp::And),
    LogicalNot => "aten.logical_not.default" => logic::logical_not,
    LogicalOr => "aten.logical_or.default" => |c| logic::compare_tensor(c, CmpOp::Or),
    LogicalXor => "aten.logical_xor.default" => |c| logic::compare_tensor(c, CmpOp::Xor),
    LtScalar => "aten.lt.Scalar" => |c| logic::compare_scalar(c, CmpOp::Lt),
    LtTensor => "aten.lt.Tensor" => |c| logic::compare_tensor(c, CmpOp::Lt),
    MaxPool2d => "aten.max_pool2d.default" => conv::max_pool2d,
    MaxPool2dWithIndices => "aten.max_pool2d_with_indices.default" => conv::max_pool2d_with_indices,
    Maximum => "aten.maximum.default" => |c| elementwise::binary(c, BinaryOp::Maximum),
    MeanDim => "aten.mean.dim" => |c| reduce::reduce(c, ReduceOp::Mean),
    Minimum => "aten.minimum.default" => |c| elementwise::binary(c, BinaryOp::Minimum),
    Mm => "aten.mm.default" => matmul::mm,
    Mul => "aten.mul.Tensor" => |c| elementwise::binary(c, BinaryOp::Mul),
    NativeGroupNorm => "aten.native_group_norm.default" => norm::native_group_norm,
    NativeLayerNorm => "aten.native_layer_norm.default" => norm::native_layer_norm,
    NeScalar => "aten.ne.Scalar" => |c| logic::compare_scalar(c, CmpOp::Ne),
    NeTensor => "aten.ne.Tensor" => |c| logic::compare_tensor(c, CmpOp::Ne),
    Neg => "aten.neg.default" => @unary Neg,
    Ones => "aten.ones.default" => |c| creation::constant(c, 1.0),
    OnesLike => "aten.ones_like.default" => |c| creation::constant_like(c, 1.0),
    Permute => "aten.permute.default" => shape::permute_copy,
    PermuteCopy => "aten.permute_copy.default" => shape::permute_copy,
    PixelShuffle => "aten.pixel_shuffle.default" => shape::pixel_shuffle,
    PowTensorScalar => "aten.pow.Tensor_Scalar" => elementwise::pow_scalar,
    PowTensorTensor => "aten.pow.Tensor_Tensor" => |c| elementwise::binary(c, BinaryOp::Pow),
    Relu => "aten.relu.default" => @unary Relu,
    Repeat => "aten.repeat.default" => layout::repeat,
    Round => "aten.round.default" => @unary Round,
    Rsqrt => "aten.rsqrt.default" => @unary Rsqrt,
    ScalarTensor => "aten.scalar_tensor.default" => creation::scalar_tensor,
    SelectCopy => "aten.select_copy.int" => shape::select_copy,
    Sigmoid => "aten.sigmoid.default" => @unary Sigmoid,
    Sin => "aten.sin.default" => @unary Sin,
    SliceCopy => "aten.slice_copy.Tensor" => shape::slice_copy,
    SplitWithSizesCopy => "aten.split_with_sizes_copy.default" => layout::split_with_sizes_copy,
    Sqrt => "aten.sqrt.default" => @unary Sqrt,
    SqueezeCopy => "aten.squeeze_copy.dims" => shape::squeeze_copy,
    Sub => "aten.sub.Tensor" => |c| elementwise::binary(c, BinaryOp::Sub),
    SumDimIntList => "aten.sum.dim_IntList" => |c| reduce::reduce(c, ReduceOp::Sum),
    Tanh => "aten.tanh.default" => @unary Tanh,
    UnfoldCopy => "aten.unfold_copy.default" => shape::unfold_copy,
    UnsqueezeCopy => "aten.unsqueeze_copy.default" => shape::unsqueeze_copy,
    UpsampleBilinear2d => "aten.upsample_bilinear2d.vec" => |c| conv::upsample2d(c, true),
    UpsampleNearest2d => "aten.upsample_nearest2d.vec" => |c| conv::upsample2d(c, false),
    ViewCopy => "aten.view_copy.default" => shape::view_copy,
    WhereSelf => "aten.where.self" => logic::where_self,
    Zeros => "aten.zeros.default" => |c| creation::constant(c, 0.0),
    ZerosLike => "aten.zeros_like.default" => |c| creation::constant_like(c, 0.0),
    ToDimOrderCopy => "dim_order_ops._to_dim_order_copy.default" => shape::to_dim_order_copy,
    AdamwStep => "et_vk.adamw_step.default" => train::adamw_step,
    ApplyRotaryEmb => "et_vk.apply_rotary_emb.default" => llm::apply_rotary_emb,
    ApplyRotaryEmbHf => "et_vk.apply_rotary_emb_hf.default" => llm::apply_rotary_emb_hf,
    ApplyRotaryEmbInterleaved => "et_vk.apply_rotary_emb_interleaved.default" => llm::apply_rotary_emb_interleaved,
    ConvWithClamp => "et_vk.conv_with_clamp.default" => |c| conv::convolution(c, true),
    EmbeddingQ4gsw => "et_vk.embedding_q4gsw.default" => quant::embedding_q4gsw,
    FusedCe => "et_vk.fused_ce.default" => train::fused_ce,
    GridPriors => "et_vk.grid_priors.default" => creation::grid_priors,
    LinearDw => "et_vk.linear_dW.default" => train::linear_dw,
    LinearDq8caQ4gsw => "et_vk.linear_dq8ca_q4gsw.default" => quant::linear_dq8ca_q4gsw,
    LinearQ4gsw => "et_vk.linear_q4gsw.default" => quant::linear_q4gsw,
    LinearQ4gswBackward => "et_vk.linear_q4gsw_backward.default" => train::linear_q4gsw_backward,
    LinearQ8taQ8csw => "et_vk.linear_q8ta_q8csw.default" => q8::linear_q8ta_q8csw,
    LinearQcs4w => "et_vk.linear_qcs4w.default" => |c| q8::weight_only_linear(c, 4),
    Prepack => "et_vk.prepack.default" => infra::prepack,
    Q4gswRequant => "et_vk.q4gsw_requant.default" => train::q4gsw_requant,
    Q8taAdd => "et_vk.q8ta_add.default" => q8::q8ta_add,
    Q8taConv2d => "et_vk.q8ta_conv2d.default" => |c| q8::q8ta_conv2d(c, ConvKind::General),
    Q8taConv2dDw => "et_vk.q8ta_conv2d_dw.default" => |c| q8::q8ta_conv2d(c, ConvKind::Depthwise),
    Q8taConv2dPw => "et_vk.q8ta_conv2d_pw.default" => |c| q8::q8ta_conv2d(c, ConvKind::General),
    Q8taConv2dTransposed => "et_vk.q8ta_conv2d_transposed.default" => |c| q8::q8ta_conv2d(c, ConvKind::Transposed),
    Q8taLinear => "et_vk.q8ta_linear.default" => q8::q8ta_linear,
    Q8taLinearGemv => "et_vk.q8ta_linear_gemv.default" => q8::q8ta_linear,
    Q8taPixelShuffle => "et_vk.q8ta_pixel_shuffle.default" => q8::q8ta_pixel_shuffle,
    Q8taRelu => "et_vk.q8ta_relu.default" => q8::q8ta_relu,
    RmsNorm => "et_vk.rms_norm.default" => llm::rms_norm,
    EtVkSdpa => "et_vk.sdpa.default" => llm::sdpa,
    SelectAsSymInt => "et_vk.select_as_symint.default" => symint::select_as_symint,
    AddRmsNorm => "etwgpu.add_rms_norm.default" => llm::add_rms_norm,
    AddSelectRmsNorm => "etwgpu.add_select_rms_norm.default" => llm::add_select_rms_norm,
    AddmmAct => "etwgpu.addmm_act.default" => |c| fused::with_act(c, matmul::addmm_with),
    ConvWithClampAct => "etwgpu.conv_with_clamp_act.default" => |c| fused::with_act(c, |c, e| conv::convolution_with(c, true, e)),
    ConvolutionAct => "etwgpu.convolution_act.default" => |c| fused::with_act(c, |c, e| conv::convolution_with(c, false, e)),
    Dq8Rows => "etwgpu.dq8_rows.default" => quant::dq8_rows,
    EmbeddingQ4gswRows => "etwgpu.embedding_q4gsw_rows.default" => quant::embedding_q4gsw_rows,
    EmbeddingRows => "etwgpu.embedding_rows.default" => index::embedding_rows,
    FusedElementwise => "etwgpu.fused_elementwise.default" => fused::fused_elementwise,
    LinearAct => "etwgpu.linear_act.default" => |c| fused::with_act(c, matmul::linear_with),
    LinearQ4gswQkv => "etwgpu.linear_q4gsw_qkv.default" => fused::linear_q4gsw_qkv,
    LinearQ4gswSwiglu => "etwgpu.linear_q4gsw_swiglu.default" => fused::linear_q4gsw_swiglu,
    LinearQkv => "etwgpu.linear_qkv.default" => fused::linear_qkv,
    LinearSwiglu => "etwgpu.linear_swiglu.default" => fused::linear_swiglu,
    RmsNormLinearQ4gsw => "etwgpu.rms_norm_linear_q4gsw.default" => fused::rms_norm_linear_q4gsw,
    RmsNormLinearQ4gswQkv => "etwgpu.rms_norm_linear_q4gsw_qkv.default" => fused::rms_norm_linear_q4gsw_qkv,
    RmsNormLinearQ4gswSwiglu => "etwgpu.rms_norm_linear_q4gsw_swiglu.default" => fused::rms_norm_linear_q4gsw_swiglu,
    RmsNormLinearQkv => "etwgpu.rms_norm_linear_qkv.default" => fused::rms_norm_linear_qkv,
    RmsNormLinearSwiglu => "etwgpu.rms_norm_linear_swiglu.default" => fused::rms_norm_linear_swiglu,
    SdpaRopeLinear => "etwgpu.sdpa_rope_linear.default" => fused::sdpa_rope_linear,
    SdpaRopeLinearQ4gsw => "etwgpu.sdpa_rope_linear_q4gsw.default" => fused::sdpa_rope_linear_q4gsw,
    SdpaRopeWithKvCache => "etwgpu.sdpa_rope_with_kv_cache.default" => fused::sdpa_rope_with_kv_cache,
    SymFloorDiv => "floordiv" => |c| symint::arith(c, SymIntOp::FloorDiv),
    SymMul => "mul" => |c| symint::arith(c, SymIntOp::Mul),
    DequantizePerTensor => "quantized_decomposed.dequantize_per_tensor.default" => q8::dequantize_per_tensor,
    QuantizePerTensor => "quantized_decomposed.quantize_per_tensor.default" => q8::quantize_per_tensor,
    SdpaWithKvCache => "sdpa_with_kv_cache.default" => llm::sdpa_with_kv_cache,
    SymSub => "sub" => |c| symint::arith(c, SymIntOp::Sub),
    SymSize => "sym_size.int" => symint::sym_size,
    ChooseQparamsAffine => "torchao.choose_qparams_affine.default" => quant::choose_qparams_affine,
    UpdateCache => "update_cache.default" => llm::update_cache,
}

impl OpId {
    /// Arguments other than its outputs that the op writes in place (the
    /// KV caches of `sdpa_with_kv_cache` and its fused RoPE form, the cache of `update_cache`, the
    /// parameter and moments of `adamw_step`). Fusion never moves or merges
    /// reads of such values, so an op that updates an argument in place
    /// must list it here.
    pub const fn mutated_args(self) -> &'static [usize] {
        match self {
            OpId::SdpaWithKvCache | OpId::SdpaRopeWithKvCache | OpId::SdpaRopeLinear | OpId::SdpaRopeLinearQ4gsw => {
                &[3, 4]
            }
            OpId::UpdateCache => &[1],
            OpId::AdamwStep => &[0, 1, 2],
            _ => &[],
        }
    }

    /// Arguments that are KV caches the op's kernels also read as float16
    /// under float32 activations (the runtime may store them so). Every
    /// such op's cache kernels have the `f32_kvf16` variant.
    pub const fn kv_cache_args(self) -> &'static [usize] {
        match self {
            OpId::SdpaWithKvCache | OpId::SdpaRopeWithKvCache | OpId::SdpaRopeLinear | OpId::SdpaRopeLinearQ4gsw => {
                &[3, 4]
            }
            _ => &[],
        }
    }
}

/// Looks an operator up by its exact ExecuTorch name (with its overload,
/// as the `.pte` spells it).
///
/// ```
/// use etwgpu_kernels::{OpId, from_name};
///
/// assert_eq!(from_name("aten.gelu.default"), Some(OpId::Gelu));
/// assert_eq!(from_name("aten.gelu"), None);
/// assert_eq!(from_name("sdpa_with_kv_cache.default").map(OpId::mutated_args), Some(&[3, 4][..]));
/// ```
pub fn from_name(name: &str) -> Option<OpId> {
    OPS.binary_search_by(|(_, n)| (*n).cmp(name)).ok().map(|i| OPS[i].0)
}
