//! Gather through an int32 index tensor: embedding, index_select, gather
//! and `aten.index.Tensor` with one index tensor.
//!
//! Over the contiguous output shape, coordinate `c` reads
//! `x[sum_d c_d * x_strides_d + k * x_dim_stride]` with
//! `k = idx[sum_d c_d * i_strides_d]`: the host zeroes the x strides of the
//! dims the index addresses and gives the index tensor's strides per output
//! dim. A negative `k` counts from the end (`k + dim_size`), as PyTorch's
//! indexing does; an index still out of range reads 0 (a GPU cannot raise
//! PyTorch's error). Pure data movement: the `i32` variant also moves bools.
//!
//! `x` may hold only rows `row_start .. row_start + rows` of the indexed
//! dim (one chunk of a table split past the binding limit): an index
//! outside them reads 0 too, so the chunks' outputs sum to the whole
//! gather. A whole table has `row_start` 0 and `rows` equal to `dim_size`.
// variants: f32 f16 i32

alias Elem = f32;

/// Invocations per workgroup (the host sizes its grid for 256).
override WG: u32 = 256u;

struct Params {
    numel: u32,
    rank: u32,
    dim_size: u32,
    x_dim_stride: u32,
    shape: array<vec4<u32>, 2>,
    x_strides: array<vec4<u32>, 2>,
    i_strides: array<vec4<u32>, 2>,
    /// First row of the indexed dim that `x` holds.
    row_start: u32,
    /// Rows of the indexed dim that `x` holds.
    rows: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read_write> out: array<Elem>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * WG;
    if i >= p.numel {
        return;
    }
    var rem = i;
    var xo = 0u;
    var io = 0u;
    for (var d = i32(p.rank) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let size = p.shape[du / 4u][du % 4u];
        let c = rem % size;
        rem = rem / size;
        xo += c * p.x_strides[du / 4u][du % 4u];
        io += c * p.i_strides[du / 4u][du % 4u];
    }
    var k = idx[io];
    if k < 0 {
        k += i32(p.dim_size);
    }
    if k < 0 || u32(k) >= p.dim_size || u32(k) < p.row_start || u32(k) - p.row_start >= p.rows {
        out[i] = Elem(0);
    } else {
        out[i] = x[xo + (u32(k) - p.row_start) * p.x_dim_stride];
    }
}
