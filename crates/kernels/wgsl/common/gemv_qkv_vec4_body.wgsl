//! The body of the streaming float QKV GEMVs: `gemv_qkv_vec4.wgsl` and its
//! normed form `gemv_qkv_norm_vec4.wgsl`. It holds which projection and
//! column each lane takes, the word loop (four words in flight), the
//! rows' scale, the lanes' tree and the stores. The including family
//! declares, besides `p`, `WG`, `partial` (`array<vec4<f32>, WG>`), the
//! weights `w0`, `w1`, `w2` and what `qkv_out.wgsl` needs:
//! - `fn prologue(lid: u32, g: u32)`, called by every invocation of
//!   workgroup `g` in uniform control flow before x is read (the normed
//!   form builds the normed rows in workgroup memory there; the plain
//!   form does nothing);
//! - `fn x_at(i: u32) -> vec4<f32>`: vec4 `i` of the input rows (row `r`
//!   from vec4 `r * k / 4`);
//! - `fn row_scale(lid: u32) -> vec4<f32>`: what each row's sums are
//!   multiplied by before the tree (the norm's scale; ones without a
//!   norm), called by every invocation in uniform control flow after its
//!   last `x_at`.

/// Word `idx` of projection `j`'s weights.
fn word(j: u32, idx: u32) -> vec4<f32> {
    switch j {
        case 0u: { return vec4<f32>(w0[idx]); }
        case 1u: { return vec4<f32>(w1[idx]); }
        default: { return vec4<f32>(w2[idx]); }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let g = wid.y * groups.x + wid.x;
    prologue(lid, g);
    let lanes = WG / p.cols;
    let lane = lid % lanes;
    let c = lid / lanes;
    let col = g * p.cols + c;
    let total = p.n0 + p.n1 + p.n2;
    // The projection of this column and its column there.
    var j = 0u;
    var n = p.n0;
    var at = col;
    if col >= p.n0 + p.n1 {
        j = 2u;
        n = p.n2;
        at = col - p.n0 - p.n1;
    } else if col >= p.n0 {
        j = 1u;
        n = p.n1;
        at = col - p.n0;
    }
    let k4 = p.k / 4u;
    var acc = vec4<f32>();
    if col < total {
        let row = at * k4;
        var i = lane;
        // Whole steps of four words: the loads first.
        for (; i + 3u * lanes < k4; i += 4u * lanes) {
            let v0 = word(j, row + i);
            let v1 = word(j, row + i + lanes);
            let v2 = word(j, row + i + 2u * lanes);
            let v3 = word(j, row + i + 3u * lanes);
            for (var r = 0u; r < p.m; r++) {
                let xr = r * k4 + i;
                acc[r] += dot(x_at(xr), v0) + dot(x_at(xr + lanes), v1) + dot(x_at(xr + 2u * lanes), v2)
                    + dot(x_at(xr + 3u * lanes), v3);
            }
        }
        // The rest, one word at a time.
        for (; i < k4; i += lanes) {
            let v = word(j, row + i);
            for (var r = 0u; r < p.m; r++) {
                acc[r] += dot(x_at(r * k4 + i), v);
            }
        }
    }
    acc *= row_scale(lid);
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u && col < total {
        let s = partial[lid];
        let b = bias(j, at);
        for (var r = 0u; r < p.m; r++) {
            store(j, r * n + at, s[r] + b);
        }
    }
}
