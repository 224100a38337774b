//! The body of the streaming float GEMVs of a dense linear:
//! `linear_gemv.wgsl`, its form with the split-KV combine folded in,
//! `linear_gemv_attn.wgsl`, and with the whole attention in it,
//! `linear_gemv_sdpa.wgsl`. It holds the lanes' columns, the word loop
//! (four words in flight: the step and its loads are written out, so a
//! wider step is a new loop, not a constant), the lanes' tree and the
//! stores. The including family declares, besides `p`, `WG`, `MAX_ROWS` (4),
//! `partial` (`array<vec4<f32>, WG>`: an invocation's sums of the four
//! rows), `w`, `bias` and `out`:
//! - `fn prologue(lid: u32)`, called by every invocation in uniform
//!   control flow before x is read (the folded forms merge or compute the
//!   attention's output rows into workgroup memory there; the plain form
//!   does nothing);
//! - `fn x_at(i: u32) -> vec4<f32>`: vec4 `i` of the input rows (row `r`
//!   from vec4 `r * k / 4`).

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let lanes = WG / p.cols;
    let lane = lid % lanes;
    let c = lid / lanes;
    let col = (wid.y * groups.x + wid.x) * p.cols + c;
    prologue(lid);
    let k4 = p.k / 4u;
    var acc = vec4<f32>();
    if col < p.n {
        let row = col * k4;
        var j = lane;
        // Whole steps of four words a lane: the loads first.
        for (; j + 3u * lanes < k4; j += 4u * lanes) {
            let w0 = vec4<f32>(w[row + j]);
            let w1 = vec4<f32>(w[row + j + lanes]);
            let w2 = vec4<f32>(w[row + j + 2u * lanes]);
            let w3 = vec4<f32>(w[row + j + 3u * lanes]);
            for (var r = 0u; r < p.m; r++) {
                let xr = r * k4 + j;
                acc[r] += dot(x_at(xr), w0) + dot(x_at(xr + lanes), w1)
                    + dot(x_at(xr + 2u * lanes), w2) + dot(x_at(xr + 3u * lanes), w3);
            }
        }
        // The rest, one word at a time.
        for (; j < k4; j += lanes) {
            let wv = vec4<f32>(w[row + j]);
            for (var r = 0u; r < p.m; r++) {
                acc[r] += dot(x_at(r * k4 + j), wv);
            }
        }
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = lanes / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if lane == 0u && col < p.n {
        let s = partial[lid];
        for (var r = 0u; r < p.m; r++) {
            var v = s[r];
            if p.has_bias != 0u {
                v += f32(bias[col]);
            }
            out[r * p.n + col] = Elem(v);
        }
    }
}
