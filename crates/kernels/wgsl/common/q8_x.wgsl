//! int8 activations for the `_i8` forms of the 4-bit GEMVs
//! (`q4_gemv_i8.wgsl`, `q4_gemv_swiglu_norm_i8.wgsl`): one row of x
//! rounded to int8 per 32-input block (the 4-bit weights' word), each
//! word's dot then taken in integers by `dot4I8Packed`.
//!
//! [`round_x`] rounds the row the including kernel reads through
//! `fn x_at(i: u32) -> vec4<f32>` (vec4 `i` of the row: storage, or the
//! workgroup memory a prologue filled) into workgroup memory: block `b`'s
//! scale is `max|x| / 127` over its 32 inputs and its inputs become
//! `round(x * 127 / max|x|)` (ties to even; a block of zeros rounds to
//! zeros with scale 0). Per 8-input octet `o` the rounded inputs are
//! packed as two u32s, the bytes of inputs `8o, 8o + 2, 8o + 4, 8o + 6`
//! and of `8o + 1, 8o + 3, 8o + 5, 8o + 7`: the bytes that the low and the
//! high nibbles of the word's u32 `o % 4` multiply once masked out with
//! `0x0F0F0F0F` (nibble `i` of a u32 at bits `4i` is input `i` of its
//! octet). Each block also keeps the sum of its rounded inputs, since the
//! nibbles hold `q + 8`: `sum (q - 8) x = sum q' x - 8 sum x` with `q'`
//! the stored nibble.
//!
//! Two passes over the row with a barrier between (each octet's max, then
//! each block's max from its four octets'); the block sums meet in
//! workgroup atomics. Invocations take octets `lid, lid + WG, ...`, so
//! every pass costs one or two loads an invocation at the decode shapes.
//! The including kernel declares `WG` and `XQ` (octets held: `K / 8` at
//! most, the host checks) and `x_at`.

/// Per octet: the packed rounded inputs `(even, odd)`.
var<workgroup> xq: array<vec2<u32>, XQ>;
/// Per octet: its max |x| (the first pass).
var<workgroup> omax: array<f32, XQ>;
/// Per block: its scale.
var<workgroup> xscale: array<f32, XQ / 4u>;
/// Per block: the sum of its rounded inputs.
var<workgroup> xsum: array<atomic<i32>, XQ / 4u>;

/// Rounds the row of `k` inputs (a multiple of 32) into `xq`, `xscale`
/// and `xsum`. Every invocation calls it in uniform control flow; it ends
/// with a barrier.
fn round_x(lid: u32, k: u32) {
    let octets = k / 8u;
    for (var o = lid; o < octets; o += WG) {
        let m4 = max(abs(x_at(2u * o)), abs(x_at(2u * o + 1u)));
        omax[o] = max(max(m4.x, m4.y), max(m4.z, m4.w));
    }
    workgroupBarrier();
    for (var o = lid; o < octets; o += WG) {
        let blk = o / 4u;
        let b0 = 4u * blk;
        let amax = max(max(omax[b0], omax[b0 + 1u]), max(omax[b0 + 2u], omax[b0 + 3u]));
        let inv = select(0.0, 127.0 / amax, amax > 0.0);
        let r0 = vec4<i32>(round(x_at(2u * o) * inv));
        let r1 = vec4<i32>(round(x_at(2u * o + 1u) * inv));
        xq[o] = vec2<u32>(
            pack4xI8(vec4<i32>(r0.x, r0.z, r1.x, r1.z)),
            pack4xI8(vec4<i32>(r0.y, r0.w, r1.y, r1.w)),
        );
        let s = r0 + r1;
        atomicAdd(&xsum[blk], s.x + s.y + s.z + s.w);
        if o == b0 {
            xscale[blk] = amax / 127.0;
        }
    }
    workgroupBarrier();
}

/// The 16-byte word `q` (32 nibbles, block `w` of the row) dotted with the
/// rounded block `w`, in x's units (the weights' scale not applied).
fn dot_i8(q: vec4<u32>, w: u32) -> f32 {
    let m = 0x0F0F0F0Fu;
    let o = 4u * w;
    let a = xq[o];
    let b = xq[o + 1u];
    let c = xq[o + 2u];
    let d = xq[o + 3u];
    var i = dot4I8Packed(q.x & m, a.x) + dot4I8Packed((q.x >> 4u) & m, a.y);
    i += dot4I8Packed(q.y & m, b.x) + dot4I8Packed((q.y >> 4u) & m, b.y);
    i += dot4I8Packed(q.z & m, c.x) + dot4I8Packed((q.z >> 4u) & m, c.y);
    i += dot4I8Packed(q.w & m, d.x) + dot4I8Packed((q.w >> 4u) & m, d.y);
    return f32(i - 8 * atomicLoad(&xsum[w])) * xscale[w];
}
