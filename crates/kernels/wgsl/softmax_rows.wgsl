//! Softmax and log-softmax along the last dim (rows contiguous), one
//! workgroup per row: its invocations take a strided share of the row for
//! the max, the sum of exponentials and the write, meeting in shared memory
//! (`softmax.wgsl`, one invocation per row, takes the other dims). Same
//! parameters as `softmax.wgsl` (`inner` is 1). f32 math.
// variants: f32 f16

alias Elem = f32;

/// Invocations per workgroup; the reductions assume a power of two.
const WG: u32 = 256u;

struct Params {
    rows: u32,
    dim: u32,
    inner: u32,
    log: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<Elem>;
@group(0) @binding(2) var<storage, read_write> out: array<Elem>;

var<workgroup> red: array<f32, WG>;

/// Tree reduction of `v` over the workgroup (max when `is_max`, else sum);
/// every invocation gets the result.
fn reduce(lid: u32, v: f32, is_max: bool) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            if is_max {
                red[lid] = max(red[lid], red[lid + stride]);
            } else {
                red[lid] += red[lid + stride];
            }
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let r = wid.y * groups.x + wid.x;
    // Workgroup-uniform: either every invocation of a group returns or none.
    if r >= p.rows {
        return;
    }
    let base = r * p.dim;
    var mx = f32(x[base]);
    for (var j = lid; j < p.dim; j += WG) {
        mx = max(mx, f32(x[base + j]));
    }
    mx = reduce(lid, mx, true);
    var sum = 0.0;
    for (var j = lid; j < p.dim; j += WG) {
        sum += exp(f32(x[base + j]) - mx);
    }
    sum = reduce(lid, sum, false);
    let log_sum = log(sum);
    for (var j = lid; j < p.dim; j += WG) {
        let shifted = f32(x[base + j]) - mx;
        if p.log != 0u {
            out[base + j] = Elem(shifted - log_sum);
        } else {
            out[base + j] = Elem(exp(shifted) / sum);
        }
    }
}
