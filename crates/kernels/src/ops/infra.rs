//! Infrastructure ops: `et_vk.prepack.default`.

use crate::error::{Error, Result};
use crate::plan::{Ctx, Lowered, Step};

/// `et_vk.prepack.default(src T(const), →out)`: the constant's bytes are
/// written into `out` once, at load.
pub fn prepack(c: &Ctx<'_>) -> Result<Lowered> {
    c.expect_args(2)?;
    let src = c.tensor(0, "src")?;
    let out = c.tensor(1, "out")?;
    if !src.is_constant {
        return Err(Error::ArgValue {
            arg_idx: 0,
            name: "src",
            found: "a non-constant tensor".into(),
            reason: "prepack copies a constant",
        });
    }
    crate::plan::same_dtype(&out, src.dtype, 1, "out")?;
    Ok(Lowered { shapes: vec![(out.id, src.shape.to_vec())], steps: vec![Step::Prepack { out: out.id, src: src.id }] })
}
