//! The rotation of the decode attention kernels that take RoPE in
//! (`sdpa_split_rope.wgsl`, `sdpa_split_sg_rope.wgsl`,
//! `q4_gemv_sdpa.wgsl`): `et_vk.apply_rotary_emb` of one `vec4` of a row.
//! The including kernel declares `Elem`, a `p` with `head_dim` and
//! `table_row`, and the tables `cos_t`, `sin_t` (`[_, D / 2]`).

/// `vec4` `d` of a row of token `t` of the call rotated: its pairs `(x, y)`
/// and `(z, w)` are pairs `2d` and `2d + 1` of the half head dim. Rounded
/// to `Elem`, as the rotation's output tensor holds it.
fn rope4(v: vec4<Elem>, t: u32, d: u32) -> vec4<f32> {
    let i = (p.table_row + t) * (p.head_dim / 2u) + 2u * d;
    let c = vec2<f32>(f32(cos_t[i]), f32(cos_t[i + 1u]));
    let sn = vec2<f32>(f32(sin_t[i]), f32(sin_t[i + 1u]));
    let x = vec4<f32>(v);
    let re = x.xz * c - x.yw * sn;
    let im = x.xz * sn + x.yw * c;
    return vec4<f32>(vec4<Elem>(vec4<f32>(re.x, im.x, re.y, im.y)));
}
