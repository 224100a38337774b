//! Split-KV ("flash-decoding") attention for a few query rows: the host
//! side of the partials kernel (`sdpa_split.wgsl`, or on devices with
//! subgroups `sdpa_split_sg.wgsl`) and the combine
//! (`sdpa_split_combine.wgsl`): which partials kernel runs
//! ([`split_route`], the one place that decides), the split plan of each
//! route, the scratch the partials need, and the two dispatches; and the
//! combine folded into the 4-bit or float GEMV that reads the attention's
//! output ([`combine_folds`], [`fold_combine`]: `q4_gemv_attn.wgsl`,
//! `linear_gemv_attn.wgsl`).

use crate::caps::DeviceCaps;
use crate::error::{Error, Result};
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::plan::{Dispatch, MAX_GROUPS_PER_DIM, Shader, Step, Uniform, Vid, grid_groups, to_u32};

/// Split-KV decode attention takes calls of at most this many query rows.
pub(super) const SPLIT_MAX_ROWS: u64 = 4;
/// The scratch slot of its partials.
pub(super) const SPLIT_SCRATCH: usize = 0;
/// Query vectors (row, head) one partials workgroup takes (`MAXQ` of both
/// kernels).
const SPLIT_QUERIES: u64 = 4;

/// The split plan's constants (`common/split_plan.wgsl` reads them from
/// the uniforms, so the partials and the combine agree): splits of at
/// least `min_keys` keys, enough to reach `target` workgroups or one
/// `tile` each, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SplitPlan {
    /// Fewest keys per split.
    pub min_keys: u64,
    /// Workgroups the splits aim for (enough to fill a large GPU).
    pub target: u64,
    /// Keys a workgroup takes in one step: past the target, more splits
    /// keep each within one.
    pub tile: u64,
    /// Most splits (bounds the scratch).
    pub max: u64,
}

/// `sdpa_split.wgsl`'s plan. A split's workgroup (`WG` invocations) walks
/// its values in `keys / (WG / (D / 4))` steps (at head dim 64 one per 16
/// keys, or per 4 in the 64-wide `sdpa_split_short.wgsl`), so at 128 keys
/// four splits of 32 take a quarter of the steps of one split of 128;
/// past the target, splits of one 256-key tile.
pub(crate) const WORKGROUP_PLAN: SplitPlan = SplitPlan { min_keys: 32, target: 256, tile: 256, max: 64 };

/// Invocations of an `sdpa_split_sg.wgsl` workgroup (`WG`): a key each at
/// once, whatever the subgroup size.
const SG_WG: u64 = 128;
/// `vec4`s of the head dim an `sdpa_split_sg` invocation may own in the
/// values (`MAX_DPL`).
const SG_MAX_DPL: u64 = 4;
/// `vec4`s of workgroup memory for its final merge (`SUMS`).
const SG_SUMS: u64 = 512;
/// Smallest subgroups it takes (`MAX_SG = SG_WG / 4` slots of their maxes).
const SG_MIN_SIZE: u32 = 4;

/// `sdpa_split_sg.wgsl`'s plan: its workgroup scores 128 keys at once (a
/// key per invocation) with no barrier between them, so a split of fewer
/// keys costs as long as one of 128: splits of at least 128 keys (fewer
/// workgroups and partials), one 128-key step each up to the 64 splits of
/// 8,192 keys.
pub(crate) const SUBGROUP_PLAN: SplitPlan = SplitPlan { min_keys: 128, target: 256, tile: 128, max: 64 };

/// Keys a tile of `sdpa_split_short.wgsl` (its workgroup of 64): the
/// workgroup route takes it where every split of the longest context fits
/// one tile.
const SHORT_TILE: u64 = 64;

/// Which kernel computes the split partials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SplitRoute {
    /// `sdpa_split.wgsl` (workgroups of 256; `sdpa_split_short.wgsl`'s of
    /// 64 where every split fits one 64-key tile), the softmax's max and sum of
    /// every key tile in workgroup-memory tree reductions (any device).
    Workgroup,
    /// `sdpa_split_sg.wgsl`: each subgroup keeps its own online softmax,
    /// the subgroups merged once; its final merge sums `merge_queries`
    /// query vectors a pass (as many as its workgroup memory holds at the
    /// device's smallest subgroups).
    Subgroup {
        /// Query vectors per merge pass, 1 to 4.
        merge_queries: u32,
    },
}

impl SplitRoute {
    /// The partials kernel's family.
    pub(crate) fn family(self) -> Family {
        match self {
            Self::Workgroup => Family::SdpaSplit,
            Self::Subgroup { .. } => Family::SdpaSplitSg,
        }
    }

    /// The split plan.
    pub(crate) fn plan(self) -> SplitPlan {
        match self {
            Self::Workgroup => WORKGROUP_PLAN,
            Self::Subgroup { .. } => SUBGROUP_PLAN,
        }
    }
}

/// The split-KV route of head dim `d` (a multiple of 4, at most 256) on a
/// device with `caps`: the subgroup kernel where the device has subgroups
/// and every size it may run them at fits that kernel (powers of two from
/// 4 to its 128-invocation workgroup, `D / 4` at most 4 per lane at the
/// smallest), else the workgroup kernel.
pub(crate) fn split_route(caps: DeviceCaps, d: u64) -> SplitRoute {
    let Some(sizes) = caps.subgroups else { return SplitRoute::Workgroup };
    let (min, max) = (u64::from(sizes.min), u64::from(sizes.max));
    let d4 = d / 4;
    let fits = sizes.min >= SG_MIN_SIZE
        && sizes.min.is_power_of_two()
        && sizes.max.is_power_of_two()
        && min <= max
        && max <= SG_WG
        && d4 <= SG_MAX_DPL * min;
    if !fits {
        return SplitRoute::Workgroup;
    }
    // The merge's (subgroup, key group) rows times the head dim, per query
    // vector: largest at the smallest subgroups.
    let per_query = if min >= d4 { SG_WG } else { SG_WG / min * d4 };
    let merge_queries = (SG_SUMS / per_query).clamp(1, SPLIT_QUERIES) as u32;
    SplitRoute::Subgroup { merge_queries }
}

/// Workgroups of one split: per kv head, its `s * group` query vectors
/// [`SPLIT_QUERIES`] at a time.
fn split_groups(s: u64, hq: u64, hkv: u64) -> u64 {
    hkv * (s * (hq / hkv)).div_ceil(SPLIT_QUERIES)
}

/// At most this many splits for a context of `ctx` keys and `s` query
/// rows under `plan`. Non-decreasing in `ctx`, so its value at the cache
/// length bounds every position.
fn split_bound(plan: &SplitPlan, s: u64, hq: u64, hkv: u64, ctx: u64) -> u64 {
    let by_keys = ctx.div_ceil(plan.min_keys);
    let by_target = plan.target.div_ceil(split_groups(s, hq, hkv)).max(ctx.div_ceil(plan.tile));
    by_keys.min(by_target).clamp(1, plan.max)
}

/// Splits and keys per split of a context of `ctx >= 1` keys: at most
/// [`split_bound`] splits of equal length but the last, none empty (the
/// kernels' `split_plan`).
#[cfg(test)]
pub(crate) fn split_plan(plan: &SplitPlan, s: u64, hq: u64, hkv: u64, ctx: u64) -> (u64, u64) {
    let chunk = ctx.div_ceil(split_bound(plan, s, hq, hkv, ctx)).max(1);
    (ctx.div_ceil(chunk).max(1), chunk)
}

/// Bytes of one (row, head, split) partial: `vec4(m, l, 0, 0)` then the
/// head dim.
fn split_partial_bytes(d: u64) -> u64 {
    (d / 4 + 1) * 16
}

/// Scratch the split kernels may use at any live shape of a cache of
/// `cmax` rows under `plan`: the most partials over every row count they
/// take, at the longest context (the split count only grows with the
/// context).
pub(crate) fn split_scratch_bytes(plan: &SplitPlan, hq: u64, hkv: u64, d: u64, cmax: u64) -> u64 {
    (1..=SPLIT_MAX_ROWS).map(|s| s * hq * split_bound(plan, s, hq, hkv, cmax)).max().unwrap_or(0)
        * split_partial_bytes(d)
}

/// One `sdpa_with_kv_cache` attention, as the split kernels see it.
pub(super) struct SplitAttn {
    pub s: u64,
    pub hq: u64,
    pub hkv: u64,
    pub d: u64,
    pub start: u64,
    pub scale: f64,
    /// The partials kernel.
    pub route: SplitRoute,
    /// The KV-cache variant of the partials kernel.
    pub variant: Variant,
    /// `sdpa_split_combine` of the query's dtype.
    pub combine: ShaderId,
}

/// The two dispatches of split-KV attention of `[query, key_cache,
/// value_cache, out]`, partials in `scratch`, for a cache of `cmax` rows;
/// the same two at every position, and their uniforms affine in it (only
/// `start_pos` changes): the kernels plan the splits of the live context
/// themselves (`common/split_plan.wgsl`, the formula of `split_plan`), and
/// the grid is sized for the longest context ([`split_bound`] is
/// non-decreasing), its extra workgroups returning.
pub(super) fn split_kv_attention(
    a: &SplitAttn,
    cmax: u64,
    [q, k, v, k_cache, v_cache, out]: [Vid; 6],
    scratch: Vid,
) -> Result<[Step; 2]> {
    let plan = a.route.plan();
    let max_splits = split_bound(&plan, a.s, a.hq, a.hkv, cmax);
    let groups = split_groups(a.s, a.hq, a.hkv);
    let target = plan.target.div_ceil(groups);
    let groups = u32::try_from(groups)
        .ok()
        .filter(|&g| g <= MAX_GROUPS_PER_DIM)
        .ok_or(Error::TooLarge { what: "workgroups of one attention split", found: groups })?;
    let plan_words = |u: Uniform| -> Result<Uniform> {
        Ok(u.u32(to_u32("split target", target)?)
            .u32(to_u32("split min keys", plan.min_keys)?)
            .u32(to_u32("split tile", plan.tile)?)
            .u32(to_u32("split max", plan.max)?))
    };
    let mut partials = plan_words(
        Uniform::new()
            .u32(to_u32("seq", a.s)?)
            .u32(to_u32("heads", a.hq)?)
            .u32(to_u32("kv heads", a.hkv)?)
            .u32(to_u32("head dim", a.d)?)
            .u32(to_u32("start_pos", a.start)?)
            .f32(a.scale as f32),
    )?;
    if let SplitRoute::Subgroup { merge_queries } = a.route {
        partials = partials.u32(merge_queries);
    }
    let combine = plan_words(
        Uniform::new()
            .u32(to_u32("seq", a.s)?)
            .u32(to_u32("heads", a.hq)?)
            .u32(to_u32("head dim", a.d)?)
            .u32(to_u32("start_pos", a.start)?),
    )?
    .finish();
    // Splits of one short tile at the longest context (caches up to 4,096
    // rows): the 64-wide workgroups.
    let family = match a.route {
        SplitRoute::Workgroup if cmax.div_ceil(max_splits) <= SHORT_TILE => Family::SdpaSplitShort,
        route => route.family(),
    };
    let shader =
        ShaderId::find(family, a.variant).expect("the split partials kernels have the f32, f16 and f32_kvf16 variants");
    Ok([
        Step::Dispatch(Dispatch {
            shader: shader.into(),
            entry: "main",
            inputs: vec![q, k, v],
            outputs: vec![k_cache, v_cache, scratch],
            params: partials.finish(),
            workgroups: [groups, to_u32("splits", max_splits)?, 1],
        }),
        Step::Dispatch(Dispatch {
            shader: a.combine.into(),
            entry: "main",
            inputs: vec![scratch],
            outputs: vec![out],
            params: combine,
            workgroups: grid_groups(a.s * a.hq)?,
        }),
    ])
}

/// Most splits (at the longest context) for which the combine folds into
/// the GEMV after it: `q4_gemv_attn.wgsl`'s merge walks a (row, head)'s
/// splits serially (four loads in flight), where the combine spreads them
/// over its workgroup, so past a few batches of four the separate combine
/// is the faster; and its workgroups each read every partial (at 16
/// splits, SmolLM2's 9 heads: 39 KB per workgroup).
pub(crate) const FOLD_MAX_SPLITS: u64 = 16;
/// (row, head, split) entries `q4_gemv_attn.wgsl` merges at most (`ML`).
const FOLD_PAIRS: u64 = 512;
/// `vec4`s of merged rows it holds at most (`XS`).
const FOLD_X_VEC4S: u64 = 512;

/// Whether split-KV attention of `s` query rows (`hq` heads over `hkv`,
/// head dim `d`, a cache of `cmax` rows) on `route` may fold its combine
/// into the GEMV reading its output ([`fold_combine`]): the plan's
/// splits at the longest context at most [`FOLD_MAX_SPLITS`], and the
/// merge's pairs and rows within the kernel's workgroup memory. Depends on
/// static dims only, so every position of a decode plan takes one route.
pub(crate) fn combine_folds(route: SplitRoute, s: u64, hq: u64, hkv: u64, d: u64, cmax: u64) -> bool {
    let splits = split_bound(&route.plan(), s, hq, hkv, cmax);
    s <= SPLIT_MAX_ROWS && splits <= FOLD_MAX_SPLITS && s * hq * splits <= FOLD_PAIRS && s * hq * d / 4 <= FOLD_X_VEC4S
}

/// The combine dispatch `combine` (of [`split_kv_attention`]) and the
/// GEMV dispatch `gemv` (`q4_gemv.wgsl`, its int8 form `q4_gemv_i8.wgsl`,
/// or the float `linear_gemv.wgsl`, reading the combine's output as its
/// `[S, Hq * D]` input) as one dispatch of `q4_gemv_attn.wgsl` (or
/// `q4_gemv_attn_i8.wgsl`, `linear_gemv_attn.wgsl`) at the GEMV's
/// variant: the GEMV's inputs with the partials in place of x, its
/// outputs and workgroups, its uniforms then the combine's. `None` where
/// `combine` or `gemv` is another kernel's, or `gemv` reads another tensor
/// than the combine writes.
pub(crate) fn fold_combine(combine: &Step, gemv: &Step) -> Option<Dispatch> {
    let (Step::Dispatch(c), Step::Dispatch(g)) = (combine, gemv) else { return None };
    let (Shader::Static(cid), Shader::Static(gid)) = (&c.shader, &g.shader) else { return None };
    let family = match gid.family() {
        Family::Q4Gemv => Family::Q4GemvAttn,
        Family::Q4GemvI8 => Family::Q4GemvAttnI8,
        Family::LinearGemv => Family::LinearGemvAttn,
        _ => return None,
    };
    let ok = cid.family() == Family::SdpaSplitCombine && c.outputs.len() == 1 && g.inputs.first() == c.outputs.first();
    if !ok {
        return None;
    }
    let shader = ShaderId::find(family, gid.variant())?;
    let mut inputs = c.inputs.clone();
    inputs.extend(&g.inputs[1..]);
    let mut params = g.params.clone();
    params.extend(&c.params);
    Some(Dispatch {
        shader: shader.into(),
        entry: "main",
        inputs,
        outputs: g.outputs.clone(),
        params,
        workgroups: g.workgroups,
    })
}

/// Most elements of one cache (keys or values: `Cmax * Hkv * D`) for which
/// the attention of one query row runs inside the 4-bit GEMV after it
/// ([`gemv_attends`]): every workgroup of that GEMV reads the whole live
/// context, so the route is for short caches (SmolLM2-135M's 512-row cache
/// is 98,304; the 1B shape's 8,320 rows 4.3 million).
pub(crate) const GEMV_ATTN_MAX_CACHE: u64 = 1 << 17;
/// `q4_gemv_sdpa.wgsl`'s bounds: most query heads per kv head (`MAXG`),
/// most query heads (`MAX_HEADS`), `vec4`s of the query (`XS`) and of
/// the new key (`NS`).
const GEMV_ATTN_MAX_GROUP: u64 = 4;
const GEMV_ATTN_MAX_HEADS: u64 = 16;
const GEMV_ATTN_QUERY_VEC4S: u64 = 256;
const GEMV_ATTN_KEY_VEC4S: u64 = 64;

/// Live context (keys) up to which a decode row's attention runs inside
/// the O projection's GEMV by default, where the device allows the kernel
/// (`DeviceCaps::gemv_attention_keys`): every workgroup of that GEMV walks
/// the keys itself, which costs less than the split route's partials
/// dispatch at a few dozen keys and more past them. On an H100 the
/// SmolLM2 shape decoded faster with it by 10% at 64 keys, 6% at 80, 3%
/// at 96 and 1% at 112, and even at 128 (`tools/device/NOTES.md`, run as,
/// fourth call; with the kernel before that run, the bound was 80); with
/// its key loads 16 bytes wide (run au, second call) by 1-3% at 96 keys
/// and 0.5% at 128, and 5% slower at 160.
pub const GEMV_ATTN_AUTO_KEYS: u32 = 128;

/// Whether the attention of `s` query rows (`hq` heads over `hkv`, head
/// dim `d`, a cache of `cmax` rows) over a live context of `live` keys on
/// a device with `caps` runs inside the 4-bit GEMV that reads its output
/// ([`attend_in_gemv`]): one row (decode), the kernel's head and dim
/// bounds, a cache of at most [`GEMV_ATTN_MAX_CACHE`] elements, and the
/// device's leave at every position (`DeviceCaps::gemv_attention`) or up
/// to its live context (`DeviceCaps::gemv_attention_keys`). A decode plan
/// changes route once, where the context passes that bound (the affine
/// model of its steps ends there; the runtime keeps the chain of each
/// side, so later generations swap chains instead of lowering again).
pub(crate) fn gemv_attends(caps: DeviceCaps, s: u64, hq: u64, hkv: u64, d: u64, cmax: u64, live: u64) -> bool {
    (caps.gemv_attention || live <= u64::from(caps.gemv_attention_keys))
        && s == 1
        && hkv > 0
        && hq.is_multiple_of(hkv)
        && hq / hkv <= GEMV_ATTN_MAX_GROUP
        && hq <= GEMV_ATTN_MAX_HEADS
        && d > 0
        && d.is_multiple_of(4)
        && hq * d / 4 <= GEMV_ATTN_QUERY_VEC4S
        && hkv * d / 4 <= GEMV_ATTN_KEY_VEC4S
        && cmax * hkv * d <= GEMV_ATTN_MAX_CACHE
}

/// The split partials dispatch `partials` (the `_rope` form of
/// [`split_kv_attention`]'s first, reading `[query, new keys, new values,
/// cos, sin]` and writing `[key cache, value cache, partials]`) and the
/// GEMV dispatch `gemv` (the 4-bit `q4_gemv.wgsl` or the float
/// `linear_gemv.wgsl`, reading the attention's output as its input) as
/// one dispatch of `q4_gemv_sdpa.wgsl` (or `linear_gemv_sdpa.wgsl`) at the
/// partials' variant:
/// the partials' inputs then the GEMV's weights (and scales) and bias; the
/// caches then the GEMV's output; the GEMV's workgroups; its uniforms then
/// the partials'. The combine between them is dropped and the partials
/// are not written. `None` where either is another kernel's, the int8
/// GEMV (`q4_gemv_i8.wgsl`) included: the kernel takes the attention's
/// output in float, where int8 activations round the projection's input
/// (which moved the real SmolLM2 export's top-1 agreement from 179 to 176
/// of 192 positions while it took the int8 GEMV's place).
pub(crate) fn attend_in_gemv(partials: &Step, gemv: &Step) -> Option<Dispatch> {
    let (Step::Dispatch(a), Step::Dispatch(g)) = (partials, gemv) else { return None };
    let (Shader::Static(aid), Shader::Static(gid)) = (&a.shader, &g.shader) else { return None };
    // The fused family and the GEMV's inputs (x, then its weights).
    let (family, gemv_inputs) = match gid.family() {
        Family::Q4Gemv => (Family::Q4GemvSdpa, 4),
        Family::LinearGemv => (Family::LinearGemvSdpa, 3),
        _ => return None,
    };
    let ok = matches!(aid.family(), Family::SdpaSplitRope | Family::SdpaSplitShortRope | Family::SdpaSplitSgRope)
        && a.inputs.len() == 5
        && a.outputs.len() == 3
        && g.inputs.len() == gemv_inputs
        && g.outputs.len() == 1
        // The kernel's `Params`: the GEMV's 8 words, then the partials' 16.
        && g.params.len() == 32
        && a.params.len() == 64;
    if !ok {
        return None;
    }
    // The partials kernel's variant (activations and cache types).
    let shader = ShaderId::find(family, aid.variant())?;
    let mut inputs = a.inputs.clone();
    inputs.extend(&g.inputs[1..]);
    let mut params = g.params.clone();
    params.extend(&a.params);
    Some(Dispatch {
        shader: shader.into(),
        entry: "main",
        inputs,
        outputs: vec![a.outputs[0], a.outputs[1], g.outputs[0]],
        params,
        workgroups: g.workgroups,
    })
}
