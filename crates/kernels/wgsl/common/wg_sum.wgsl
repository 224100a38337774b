//! A sum over a workgroup's invocations, shared by the row-wise norms
//! (`rms_norm.wgsl`, `add_rms_norm.wgsl`, `add_select_rms_norm.wgsl`): a
//! tree in workgroup memory. The kernel that includes this declares
//! `const WG: u32`, a power of two.

var<workgroup> partial: array<f32, WG>;

/// `v` summed over the workgroup's `WG` invocations (`lid` is the caller's
/// local index); every invocation gets the sum. Call in uniform control
/// flow.
fn workgroup_sum(v: f32, lid: u32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if lid < stride {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    return partial[0];
}
