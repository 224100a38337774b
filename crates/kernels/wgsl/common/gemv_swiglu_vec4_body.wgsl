//! The body of the streaming float SwiGLU GEMVs: `gemv_swiglu_vec4.wgsl`
//! and its normed form `gemv_swiglu_norm_vec4.wgsl`. It holds the lanes'
//! columns, the word loop (two words of each weight in flight), the rows'
//! scale, the lanes' trees and the stores. The including family declares,
//! besides `p`, `WG`, `partial` (`array<vec4<f32>, WG>` at least: the
//! gate's sums), the weights and biases `w_gate`, `b_gate`, `w_up`,
//! `b_up` and `out`:
//! - `fn prologue(lid: u32, g: u32)`, called by every invocation of
//!   workgroup `g` in uniform control flow before x is read (the normed
//!   form builds the normed rows in workgroup memory there; the plain
//!   form does nothing);
//! - `fn x_at(i: u32) -> vec4<f32>`: vec4 `i` of the input rows (row `r`
//!   from vec4 `r * k / 4`);
//! - `fn row_scale(lid: u32) -> vec4<f32>`: what each row's sums are
//!   multiplied by before the trees (the norm's scale; ones without a
//!   norm), called by every invocation in uniform control flow after its
//!   last `x_at`;
//! - `fn up_get(i: u32) -> vec4<f32>` and `fn up_set(i: u32, v:
//!   vec4<f32>)`: the up sums' slot `i < WG` in workgroup memory, written
//!   only after `row_scale`.

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
    let k4 = p.k / 4u;
    var acc_g = vec4<f32>();
    var acc_u = vec4<f32>();
    if col < p.n {
        let row = col * k4;
        var j = lane;
        // Whole steps of two words a row: the four loads first.
        for (; j + lanes < k4; j += 2u * lanes) {
            let g0 = vec4<f32>(w_gate[row + j]);
            let g1 = vec4<f32>(w_gate[row + j + lanes]);
            let u0 = vec4<f32>(w_up[row + j]);
            let u1 = vec4<f32>(w_up[row + j + lanes]);
            for (var r = 0u; r < p.m; r++) {
                let x0 = x_at(r * k4 + j);
                let x1 = x_at(r * k4 + j + lanes);
                acc_g[r] += dot(x0, g0) + dot(x1, g1);
                acc_u[r] += dot(x0, u0) + dot(x1, u1);
            }
        }
        if j < k4 {
            let g0 = vec4<f32>(w_gate[row + j]);
            let u0 = vec4<f32>(w_up[row + j]);
            for (var r = 0u; r < p.m; r++) {
                let x0 = x_at(r * k4 + j);
                acc_g[r] += dot(x0, g0);
                acc_u[r] += dot(x0, u0);
            }
        }
    }
    let scale = row_scale(lid);
    partial[lid] = acc_g * scale;
    up_set(lid, acc_u * scale);
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial[lid] += partial[lid + stride];
            up_set(lid, up_get(lid) + up_get(lid + stride));
        }
        workgroupBarrier();
    }
    if lane == 0u && col < p.n {
        var bg = 0.0;
        var bu = 0.0;
        if (p.has_bias & 1u) != 0u {
            bg = f32(b_gate[col]);
        }
        if (p.has_bias & 2u) != 0u {
            bu = f32(b_up[col]);
        }
        let sg = partial[lid];
        let su = up_get(lid);
        for (var r = 0u; r < p.m; r++) {
            let gv = sg[r] + bg;
            let uv = su[r] + bu;
            out[r * p.n + col] = Elem(gv * (1.0 / (1.0 + exp(-gv))) * uv);
        }
    }
}
