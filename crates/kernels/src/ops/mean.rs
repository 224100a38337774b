//! `aten.mean.dim` over one contiguous run of dims (`mean_dim.wgsl`): the
//! input is seen as `[outer, reduced, inner]`.

use crate::error::{Error, Result};
use crate::generated::shaders::Family;
use crate::plan::{
    Ctx, Dispatch, Lowered, Step, Uniform, Value, WG_ROWS, float_shader, grid_1d, norm_dim, same_dtype, to_u32,
};

/// `aten.mean.dim(self, dim, keepdim, dtype?, →out)`: the listed dims must
/// be adjacent (in any order); an empty list reduces every dim.
pub fn mean_dim(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(5)?;
    let x = c.tensor(0, "self")?;
    let dims = match c.value(1) {
        Value::Null => Vec::new(),
        _ => c.int_list(1, "dim")?,
    };
    let keepdim = c.bool(2, "keepdim")?;
    let out = c.tensor(4, "out")?;
    let shader = float_shader(Family::MeanDim, &x, 0, "self")?;
    same_dtype(&out, x.dtype, 4, "out")?;
    let rank = x.shape.len();
    let bad = |reason| Error::ArgValue { arg_idx: 1, name: "dim", found: format!("{dims:?}"), reason };
    let mut reduced = vec![false; rank];
    for &d in &dims {
        let i = norm_dim(d, rank.max(1)).ok_or_else(|| bad("dims in range"))?;
        if i < rank {
            reduced[i] = true;
        }
    }
    if dims.is_empty() {
        reduced.iter_mut().for_each(|r| *r = true);
    }
    let first = reduced.iter().position(|&r| r).unwrap_or(rank);
    let last = reduced.iter().rposition(|&r| r).map_or(rank, |l| l + 1);
    if reduced[first..last].contains(&false) {
        return Err(bad("adjacent dims (one contiguous run)"));
    }
    let outer: u64 = x.shape[..first].iter().product();
    let n: u64 = x.shape[first..last].iter().product();
    let inner: u64 = x.shape[last..].iter().product();
    let shape: Vec<u64> = x
        .shape
        .iter()
        .zip(&reduced)
        .filter_map(|(&s, &r)| match (r, keepdim) {
            (false, _) => Some(s),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    let rows = outer * inner;
    let mut steps = Vec::new();
    if rows > 0 {
        let params = Uniform::new()
            .u32(to_u32("rows", rows)?)
            .u32(to_u32("reduced size", n)?)
            .u32(to_u32("inner size", inner)?)
            .u32(0)
            .finish();
        steps.push(Step::Dispatch(Dispatch {
            shader,
            entry: "main",
            inputs: vec![x.id],
            outputs: vec![out.id],
            params,
            workgroups: grid_1d(rows, WG_ROWS)?,
        }));
    }
    Ok(Lowered { shapes: vec![(out.id, shape)], steps })
}
