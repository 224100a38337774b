//! Prompt attention on cooperative matrices (tensor cores):
//! `sdpa_prefill_coop.wgsl`, the route `sdpa_with_kv_cache` takes for
//! prompts instead of `sdpa_prefill.wgsl` where [`attention_coop`] allows
//! it. Same bindings and parameters as the tiled prefill kernel, so the
//! caller swaps only the shader and the grid (one workgroup per 64 query
//! rows and query head).

use crate::caps::{DeviceCaps, Product};
use crate::error::Result;
use crate::generated::shaders::{Family, ShaderId, Variant};
use crate::plan::{ElemType, grid_groups};

/// Query rows per workgroup of `sdpa_prefill_coop.wgsl` (its `BQ`).
pub const COOP_ATTENTION_ROWS: u64 = 64;
/// The largest head dim it holds (two halves of 64 dims of fragments).
pub const COOP_ATTENTION_MAX_HEAD_DIM: u64 = 128;

/// Whether attention with queries of `query` dtype over a KV cache that
/// holds float16 (`kv_f16`) may run on the matrix units: the device has
/// them and the query may be rounded to f16 operands (float16 programs
/// always, float32 ones where the load's precision allows it for
/// [`Product::Attention`]: `mixed` or `f16`), and the keys
/// and values are float16 already (a float32 cache keeps
/// `sdpa_prefill.wgsl`), and the route is not switched off
/// ([`DeviceCaps::coop_attention`]).
/// The one place this route's gate lives.
pub fn attention_coop(caps: DeviceCaps, query: ElemType, kv_f16: bool) -> bool {
    caps.coop_attention && kv_f16 && caps.coop(query == ElemType::F16, Product::Attention)
}

/// The cooperative-matrix kernel and its workgroups for a prompt of `s`
/// query rows, `hq` query heads and head dim `d` whose tiled prefill
/// kernel variant is `variant` (`f16`, or `f32_kvf16`: the cache float16
/// under float32 queries), where [`attention_coop`] allows it and the
/// kernel holds the head dim (a multiple of 16 up to
/// [`COOP_ATTENTION_MAX_HEAD_DIM`]); `None` keeps the tiled kernel.
pub(crate) fn prefill_coop(
    caps: DeviceCaps,
    variant: Variant,
    s: u64,
    hq: u64,
    d: u64,
) -> Result<Option<(ShaderId, [u32; 3])>> {
    let query = match variant {
        Variant::F16 => ElemType::F16,
        Variant::F32Kvf16 => ElemType::F32,
        _ => return Ok(None),
    };
    let fits = d > 0 && d.is_multiple_of(16) && d <= COOP_ATTENTION_MAX_HEAD_DIM;
    if !fits || !attention_coop(caps, query, true) {
        return Ok(None);
    }
    let shader =
        ShaderId::find(Family::SdpaPrefillCoop, variant).expect("sdpa_prefill_coop has the f16 and f32_kvf16 variants");
    Ok(Some((shader, grid_groups(s.div_ceil(COOP_ATTENTION_ROWS) * hq)?)))
}
