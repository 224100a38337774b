//! Cooperative-matrix shaders compiled to SPIR-V here, with their
//! workgroup-memory accesses made visible to the workgroup's barriers, and
//! handed to Vulkan through wgpu's passthrough path.
//!
//! A shader that uses cooperative matrices is written by naga (30) under
//! the Vulkan memory model (`OpMemoryModel Logical Vulkan`, which
//! `SPV_KHR_cooperative_matrix` needs), but with the accesses and barriers
//! it writes for the GLSL450 model: plain `OpLoad` / `OpStore` and
//! cooperative-matrix loads and stores carry no `NonPrivatePointer`, and
//! `workgroupBarrier()` becomes an `OpControlBarrier` with
//! `AcquireRelease | WorkgroupMemory` and no `MakeAvailable | MakeVisible`.
//! Under the Vulkan model such accesses are private to their invocation:
//! no barrier orders them against another invocation's, so a driver may
//! move a read of workgroup memory across the barrier that was meant to
//! make another subgroup's store visible. That matched what the prompt
//! attention (`sdpa_prefill_coop.wgsl`) did on the H200: it read scores
//! that were not the ones stored, and gave different results on the same
//! inputs from run to run (`tools/device/NOTES.md`, runs ag-ai). With the
//! fix it is still wrong there (run ak), so the fix is opt-in
//! ([`COOP_SPIRV_ENV`]): the words it writes are what the SPIR-V
//! specification asks for, and a tool for the next step of that hunt.
//!
//! [`fix_memory_model`] rewrites naga's words: every load and store through
//! a workgroup pointer (plain and cooperative-matrix) gains
//! `NonPrivatePointer`, and every barrier's semantics gain `MakeAvailable |
//! MakeVisible`, so a barrier publishes the workgroup's stores before it and
//! the reads after it see them (the Vulkan memory model's availability and
//! visibility). Storage-buffer accesses are left as they are: no
//! cooperative-matrix kernel shares a storage buffer between invocations
//! within a dispatch, and between dispatches wgpu's pipeline barriers make
//! every write available.
//!
//! The SPIR-V is written with the options wgpu's Vulkan backend uses
//! (buffer and index accesses clamped into bounds, workgroup memory
//! zeroed), and the bind group layout that wgpu would derive is built from
//! the shader's bindings ([`bind_group_layout_entries`]), since a
//! passthrough module carries no reflection.

use naga::back::spv;

/// `ETWGPU_COOP_SPIRV=fixed` creates cooperative-matrix shaders through
/// [`compile`] (the memory-model fix, passthrough); unset (or `naga`),
/// they go through wgpu as written. Opt-in: on the H200 the fix did not
/// make the prompt attention right and cost the 4-bit prefill GEMMs ~18%
/// (run ak), so it stays a tool for the investigation.
pub const COOP_SPIRV_ENV: &str = "ETWGPU_COOP_SPIRV";

/// Whether cooperative-matrix shaders take the fix (`ETWGPU_COOP_SPIRV=fixed`).
pub(crate) fn fix_on() -> bool {
    std::env::var(COOP_SPIRV_ENV).is_ok_and(|v| v == "fixed")
}

/// Whether `source` is a WGSL shader that uses cooperative matrices.
pub(crate) fn uses_coop_matrices(source: &str) -> bool {
    source.lines().any(|l| l.trim() == "enable wgpu_cooperative_matrix;")
}

/// A shader compiled here: its SPIR-V (fixed) and its group-0 bindings.
#[derive(Debug)]
pub(crate) struct Compiled {
    pub words: Vec<u32>,
    pub bindings: Vec<wgpu::BindGroupLayoutEntry>,
    /// What [`fix_memory_model`] changed (checked by the tests).
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the tests, which check every access was fixed"))]
    pub fixed: FixCounts,
}

/// Parses, validates and writes `source` (entry point `main`, compute) as
/// SPIR-V with its memory-model fix; `loop_bounding` keeps naga's loop
/// guard. Errors are naga's messages.
pub(crate) fn compile(source: &str, loop_bounding: bool) -> Result<Compiled, String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| e.emit_to_string(source))?;
    let bindings = bind_group_layout_entries(&module)?;
    // Group 0 is descriptor set 0, each binding its own number (as wgpu's
    // pipeline layouts map them).
    let binding_map = bindings
        .iter()
        .map(|e| {
            let rb = naga::ResourceBinding { group: 0, binding: e.binding };
            (rb, spv::BindingInfo { descriptor_set: 0, binding: e.binding, binding_array_size: None })
        })
        .collect();
    let options = spv::Options {
        binding_map,
        // SPIR-V 1.3 (Vulkan 1.1); the memory model comes from its
        // extension, which naga declares with the capability.
        lang_version: (1, 3),
        flags: spv::WriterFlags::empty(),
        fake_missing_bindings: false,
        bounds_check_policies: naga::proc::BoundsCheckPolicies {
            index: naga::proc::BoundsCheckPolicy::Restrict,
            buffer: naga::proc::BoundsCheckPolicy::Restrict,
            image_load: naga::proc::BoundsCheckPolicy::Restrict,
            binding_array: naga::proc::BoundsCheckPolicy::Unchecked,
        },
        zero_initialize_workgroup_memory: spv::ZeroInitializeWorkgroupMemoryMode::Polyfill,
        force_loop_bounding: loop_bounding,
        ..spv::Options::default()
    };
    let pipeline = spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
    let mut words = spv::write_vec(&module, &info, &options, Some(&pipeline)).map_err(|e| e.to_string())?;
    let fixed = fix_memory_model(&mut words)?;
    Ok(Compiled { words, bindings, fixed })
}

/// The bind group layout entries of `module`'s resources, as wgpu derives
/// them: group 0 only (every kernel binds there), uniform and storage
/// buffers.
pub(crate) fn bind_group_layout_entries(module: &naga::Module) -> Result<Vec<wgpu::BindGroupLayoutEntry>, String> {
    let mut entries = Vec::new();
    for (_, var) in module.global_variables.iter() {
        let Some(binding) = &var.binding else { continue };
        if binding.group != 0 {
            return Err(format!("binding in group {} (kernels bind group 0 only)", binding.group));
        }
        let ty = match var.space {
            naga::AddressSpace::Uniform => wgpu::BufferBindingType::Uniform,
            naga::AddressSpace::Storage { access } => {
                wgpu::BufferBindingType::Storage { read_only: !access.contains(naga::StorageAccess::STORE) }
            }
            other => return Err(format!("binding {} in address space {other:?}", binding.binding)),
        };
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: binding.binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: false, min_binding_size: None },
            count: None,
        });
    }
    entries.sort_by_key(|e| e.binding);
    Ok(entries)
}

// SPIR-V opcodes and operands used below (SPIR-V 1.6 unified spec).
const OP_TYPE_INT: u32 = 21;
const OP_CONSTANT: u32 = 43;
const OP_TYPE_POINTER: u32 = 32;
const OP_FUNCTION_PARAMETER: u32 = 55;
const OP_VARIABLE: u32 = 59;
const OP_LOAD: u32 = 61;
const OP_STORE: u32 = 62;
const OP_ACCESS_CHAIN: u32 = 65;
const OP_IN_BOUNDS_ACCESS_CHAIN: u32 = 66;
const OP_PTR_ACCESS_CHAIN: u32 = 67;
const OP_COPY_OBJECT: u32 = 83;
const OP_MEMORY_MODEL: u32 = 14;
const OP_CONTROL_BARRIER: u32 = 224;
const OP_MEMORY_BARRIER: u32 = 225;
const OP_COOP_MATRIX_LOAD: u32 = 4457;
const OP_COOP_MATRIX_STORE: u32 = 4458;
const STORAGE_WORKGROUP: u32 = 4;
const MEMORY_MODEL_VULKAN: u32 = 3;
/// Memory operand `NonPrivatePointer`: it takes no operand word of its
/// own, so OR-ing it into an existing mask (whose `Aligned`,
/// `MakePointerAvailable`, `MakePointerVisible` words follow in bit order)
/// keeps the instruction well formed.
const NON_PRIVATE_POINTER: u32 = 0x20;
/// Memory semantics `MakeAvailable | MakeVisible`.
const MAKE_AVAILABLE_VISIBLE: u32 = 0x2000 | 0x4000;

/// What [`fix_memory_model`] changed in a module.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FixCounts {
    /// Plain loads and stores through workgroup pointers given `NonPrivatePointer`.
    pub accesses: usize,
    /// Cooperative-matrix loads and stores through workgroup pointers given it.
    pub coop_accesses: usize,
    /// Barriers given `MakeAvailable | MakeVisible`.
    pub barriers: usize,
}

/// One instruction's place in the word stream.
struct Inst {
    at: usize,
    len: usize,
    op: u32,
}

fn instructions(words: &[u32]) -> Result<Vec<Inst>, String> {
    if words.len() < 5 || words[0] != 0x0723_0203 {
        return Err("not a SPIR-V module".into());
    }
    let mut out = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let len = (words[at] >> 16) as usize;
        if len == 0 || at + len > words.len() {
            return Err(format!("malformed instruction at word {at}"));
        }
        out.push(Inst { at, len, op: words[at] & 0xffff });
        at += len;
    }
    Ok(out)
}

/// `inst` (a load or store) with `NonPrivatePointer` in its memory-operand
/// mask, which sits at word `first` of the instruction when present.
fn with_non_private(inst: &[u32], first: usize) -> Vec<u32> {
    let mut out = inst.to_vec();
    if inst.len() > first {
        out[first] |= NON_PRIVATE_POINTER;
    } else {
        out.push(NON_PRIVATE_POINTER);
    }
    out[0] = ((out.len() as u32) << 16) | (out[0] & 0xffff);
    out
}

/// Rewrites a module that naga wrote under the Vulkan memory model so that
/// its workgroup-memory accesses are ordered by its barriers (see the
/// module docs). A module under another memory model is left as it is (its
/// barriers order every access already). Returns what it changed.
pub fn fix_memory_model(words: &mut Vec<u32>) -> Result<FixCounts, String> {
    let insts = instructions(words)?;
    let vulkan = insts.iter().any(|i| i.op == OP_MEMORY_MODEL && i.len == 3 && words[i.at + 2] == MEMORY_MODEL_VULKAN);
    if !vulkan {
        return Ok(FixCounts::default());
    }
    // Pointer types' storage classes, then every pointer value's type.
    let mut class_of_type = std::collections::HashMap::new();
    let mut type_of_value = std::collections::HashMap::new();
    let mut u32_type = None;
    // Constants' values by id (u32 only), to find the barrier semantics.
    let mut constants = std::collections::HashMap::new();
    let mut last_constant = None;
    for i in &insts {
        let w = &words[i.at..i.at + i.len];
        match i.op {
            OP_TYPE_POINTER if i.len == 4 => {
                class_of_type.insert(w[1], w[2]);
            }
            OP_TYPE_INT if i.len == 4 && w[2] == 32 && w[3] == 0 => u32_type = Some(w[1]),
            OP_CONSTANT if i.len == 4 => {
                constants.insert(w[2], (w[1], w[3]));
                last_constant = Some(i.at + i.len);
            }
            OP_VARIABLE
            | OP_ACCESS_CHAIN
            | OP_IN_BOUNDS_ACCESS_CHAIN
            | OP_PTR_ACCESS_CHAIN
            | OP_FUNCTION_PARAMETER
            | OP_COPY_OBJECT
                if i.len >= 3 =>
            {
                type_of_value.insert(w[2], w[1]);
            }
            _ => {}
        }
    }
    let workgroup =
        |ptr: u32| type_of_value.get(&ptr).and_then(|t| class_of_type.get(t)).is_some_and(|&c| c == STORAGE_WORKGROUP);
    let u32_type = u32_type.ok_or("no 32-bit unsigned integer type for the barrier semantics")?;
    let mut bound = words[3];
    // New constants: semantics value -> id.
    let mut new_semantics: Vec<(u32, u32)> = Vec::new();
    let mut counts = FixCounts::default();
    let mut out = Vec::with_capacity(words.len() + 64);
    out.extend_from_slice(&words[..5]);
    // Rewritten instructions, and where the new constants go.
    let mut body: Vec<(usize, Vec<u32>)> = Vec::with_capacity(insts.len());
    for i in &insts {
        let w = &words[i.at..i.at + i.len];
        let rewritten = match i.op {
            OP_LOAD if i.len >= 4 && workgroup(w[3]) => {
                counts.accesses += 1;
                with_non_private(w, 4)
            }
            OP_STORE if i.len >= 3 && workgroup(w[1]) => {
                counts.accesses += 1;
                with_non_private(w, 3)
            }
            // Result type, result, pointer, layout, stride, operands.
            OP_COOP_MATRIX_LOAD if i.len >= 6 && workgroup(w[3]) => {
                counts.coop_accesses += 1;
                with_non_private(w, 6)
            }
            // Pointer, object, layout, stride, operands.
            OP_COOP_MATRIX_STORE if i.len >= 5 && workgroup(w[1]) => {
                counts.coop_accesses += 1;
                with_non_private(w, 5)
            }
            OP_CONTROL_BARRIER | OP_MEMORY_BARRIER => {
                let s = if i.op == OP_CONTROL_BARRIER { 3 } else { 2 };
                if i.len != s + 1 {
                    return Err(format!("barrier of {} words at word {}", i.len, i.at));
                }
                let &(ty, value) =
                    constants.get(&w[s]).ok_or_else(|| format!("barrier semantics %{} is not a constant", w[s]))?;
                if ty != u32_type {
                    return Err(format!("barrier semantics %{} is not a u32 constant", w[s]));
                }
                let value = value | MAKE_AVAILABLE_VISIBLE;
                let id = match new_semantics.iter().find(|(v, _)| *v == value) {
                    Some(&(_, id)) => id,
                    None => {
                        let id = bound;
                        bound += 1;
                        new_semantics.push((value, id));
                        id
                    }
                };
                counts.barriers += 1;
                let mut v = w.to_vec();
                v[s] = id;
                v
            }
            _ => w.to_vec(),
        };
        body.push((i.at, rewritten));
    }
    let insert_at = last_constant.ok_or("no constants before the functions")?;
    for (at, inst) in body {
        if at == insert_at {
            for &(value, id) in &new_semantics {
                out.extend_from_slice(&[(4 << 16) | OP_CONSTANT, u32_type, id, value]);
            }
        }
        out.extend_from_slice(&inst);
    }
    out[3] = bound;
    *words = out;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use etwgpu_kernels::ShaderId;

    use super::*;

    /// Every cooperative-matrix kernel, as the runtime would create it.
    fn coop_kernels() -> Vec<ShaderId> {
        ShaderId::ALL.iter().copied().filter(|id| uses_coop_matrices(id.source())).collect()
    }

    /// Each instruction of `words` as (opcode, its words).
    fn each(words: &[u32]) -> Vec<(u32, Vec<u32>)> {
        instructions(words).unwrap().iter().map(|i| (i.op, words[i.at..i.at + i.len].to_vec())).collect()
    }

    #[test]
    fn every_workgroup_access_and_barrier_is_ordered_after_the_fix() {
        let ids = coop_kernels();
        assert!(ids.len() >= 10, "found {} cooperative-matrix kernels", ids.len());
        for id in ids {
            let c = compile(id.source(), false).unwrap_or_else(|e| panic!("{}: {e}", id.label()));
            assert!(c.fixed.accesses > 0 && c.fixed.coop_accesses > 0 && c.fixed.barriers > 0, "{}", id.label());
            let insts = each(&c.words);
            let mut class_of_type = std::collections::HashMap::new();
            let mut type_of_value = std::collections::HashMap::new();
            let mut constants = std::collections::HashMap::new();
            for (op, w) in &insts {
                match *op {
                    OP_TYPE_POINTER => {
                        class_of_type.insert(w[1], w[2]);
                    }
                    OP_CONSTANT => {
                        constants.insert(w[2], w[3]);
                    }
                    OP_VARIABLE | OP_ACCESS_CHAIN | OP_FUNCTION_PARAMETER => {
                        type_of_value.insert(w[2], w[1]);
                    }
                    _ => {}
                }
            }
            let workgroup = |p: u32| class_of_type.get(&type_of_value[&p]) == Some(&STORAGE_WORKGROUP);
            let (mut loads, mut barriers) = (0, 0);
            for (op, w) in &insts {
                let mask = match *op {
                    OP_LOAD if workgroup(w[3]) => w.get(4),
                    OP_STORE if workgroup(w[1]) => w.get(3),
                    OP_COOP_MATRIX_LOAD if workgroup(w[3]) => w.get(6),
                    OP_COOP_MATRIX_STORE if workgroup(w[1]) => w.get(5),
                    OP_CONTROL_BARRIER => {
                        barriers += 1;
                        assert_eq!(constants[&w[3]] & MAKE_AVAILABLE_VISIBLE, MAKE_AVAILABLE_VISIBLE, "{}", id.label());
                        continue;
                    }
                    _ => continue,
                };
                loads += 1;
                assert!(mask.is_some_and(|m| m & NON_PRIVATE_POINTER != 0), "{}: {op} {w:?}", id.label());
            }
            assert_eq!(loads, c.fixed.accesses + c.fixed.coop_accesses, "{}", id.label());
            assert_eq!(barriers, c.fixed.barriers, "{}", id.label());
            assert_eq!(c.words[3] as usize, 1 + insts.iter().filter_map(|(_, w)| result_id(w)).max().unwrap() as usize);
        }
    }

    /// The result id an instruction defines, for the few kinds the fix adds
    /// or that define ids near the bound (enough for the bound check).
    fn result_id(w: &[u32]) -> Option<u32> {
        match w[0] & 0xffff {
            OP_CONSTANT | OP_VARIABLE | OP_LOAD | OP_ACCESS_CHAIN => Some(w[2]),
            _ => None,
        }
    }

    #[test]
    fn a_module_under_the_glsl450_model_is_left_as_it_is() {
        let source = ShaderId::ALL.iter().find(|id| !uses_coop_matrices(id.source())).unwrap().source();
        let module = naga::front::wgsl::parse_str(source).unwrap();
        let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
            .validate(&module)
            .unwrap();
        let pipeline = spv::PipelineOptions { shader_stage: naga::ShaderStage::Compute, entry_point: "main".into() };
        let mut words = spv::write_vec(&module, &info, &spv::Options::default(), Some(&pipeline)).unwrap();
        let before = words.clone();
        assert_eq!(fix_memory_model(&mut words).unwrap(), FixCounts::default());
        assert_eq!(words, before);
    }

    #[test]
    fn bindings_follow_the_shader() {
        let id = coop_kernels()[0];
        let module = naga::front::wgsl::parse_str(id.source()).unwrap();
        let entries = bind_group_layout_entries(&module).unwrap();
        assert!(matches!(entries[0].ty, wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Uniform, .. }));
        let writable = entries
            .iter()
            .filter(|e| {
                matches!(
                    e.ty,
                    wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Storage { read_only: false }, .. }
                )
            })
            .count();
        assert_eq!(writable, 1, "{}", id.label());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(fix_memory_model(&mut vec![1, 2, 3]).is_err());
        let mut truncated = vec![0x0723_0203, 0x10300, 0, 10, 0, (9 << 16) | OP_LOAD];
        assert!(fix_memory_model(&mut truncated).is_err());
    }
}
