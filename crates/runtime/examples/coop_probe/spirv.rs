//! `coop_probe --spirv DIR`: each module's SPIR-V (per kind of checks), as
//! wgpu's Vulkan backend would make it, and its WGSL source, written under
//! `DIR`, with counts of the operations that matter to these kernels.

use std::io::Write;

use crate::CHECKS;
use crate::kernels::{self, Kernel};

/// Writes each module's SPIR-V (per kind of checks) and WGSL source under
/// `dir` and prints the counts of the operations that matter here.
pub fn write_spirv(
    stdout: &mut impl Write,
    dir: &str,
    kernels: &[Kernel],
    parsed: &[(wgpu::naga::Module, wgpu::naga::valid::ModuleInfo)],
) {
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("coop_probe: {dir}: {e}");
        std::process::exit(1);
    }
    let _ = writeln!(
        stdout,
        "SPIR-V op counts: coop loads / stores / multiply-adds, function-variable loads / stores, \
         loops, umin (index clamps), selects, integer div+mod, barriers"
    );
    let file_name =
        |label: &str| -> String { label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect() };
    for (kernel, (module, info)) in kernels.iter().zip(parsed) {
        let path = format!("{dir}/{}.wgsl", file_name(&format!("{:?} {}", kernel.weights(), kernel.name())));
        if let Err(e) = std::fs::write(&path, kernel.source()) {
            eprintln!("coop_probe: {path}: {e}");
            std::process::exit(1);
        }
        for checks in CHECKS {
            let words = match kernels::spirv(module, info, checks) {
                Ok(w) => w,
                Err(e) => {
                    eprintln!("coop_probe: {}: SPIR-V: {e}", kernel.name());
                    std::process::exit(1);
                }
            };
            let label = format!("{:?} {} {}", kernel.weights(), kernel.name(), checks.name());
            let path = format!("{dir}/{}.spv", file_name(&label));
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            if let Err(e) = std::fs::write(&path, bytes) {
                eprintln!("coop_probe: {path}: {e}");
                std::process::exit(1);
            }
            let c = op_counts(&words);
            let _ = writeln!(stdout, "  {label:<60} {c}");
        }
    }
}

/// Counts of a few SPIR-V operations, as one line.
fn op_counts(words: &[u32]) -> String {
    // Opcodes: OpCooperativeMatrix{Load,Store,MulAdd}KHR, OpLoad, OpStore,
    // OpLoopMerge, OpExtInst, OpSelect, OpUDiv, OpUMod, OpControlBarrier.
    const COOP_LOAD: u32 = 4457;
    const COOP_STORE: u32 = 4458;
    const COOP_MULADD: u32 = 4459;
    const TYPE_COOP: u32 = 4456;
    const LOAD: u32 = 61;
    const STORE: u32 = 62;
    const VARIABLE: u32 = 59;
    const LOOP_MERGE: u32 = 246;
    const EXT_INST: u32 = 12;
    const SELECT: u32 = 169;
    const UDIV: u32 = 134;
    const UMOD: u32 = 137;
    const BARRIER: u32 = 224;
    const TYPE_POINTER: u32 = 32;
    const STORAGE_FUNCTION: u32 = 7;
    let mut coop_types = std::collections::BTreeSet::new();
    let mut coop_fn_pointers = std::collections::BTreeSet::new();
    let mut coop_fn_vars = std::collections::BTreeSet::new();
    let mut counts = std::collections::BTreeMap::<&str, u32>::new();
    let mut at = 5;
    while at < words.len() {
        let (op, len) = (words[at] & 0xFFFF, (words[at] >> 16) as usize);
        let w = &words[at..at + len.max(1)];
        match op {
            TYPE_COOP => {
                coop_types.insert(w[1]);
            }
            TYPE_POINTER if w[2] == STORAGE_FUNCTION && coop_types.contains(&w[3]) => {
                coop_fn_pointers.insert(w[1]);
            }
            VARIABLE if coop_fn_pointers.contains(&w[1]) => {
                coop_fn_vars.insert(w[2]);
            }
            COOP_LOAD => *counts.entry("coop load").or_default() += 1,
            COOP_STORE => *counts.entry("coop store").or_default() += 1,
            COOP_MULADD => *counts.entry("coop muladd").or_default() += 1,
            LOAD if coop_fn_vars.contains(&w[3]) => *counts.entry("var load").or_default() += 1,
            STORE if coop_fn_vars.contains(&w[1]) => *counts.entry("var store").or_default() += 1,
            LOOP_MERGE => *counts.entry("loop").or_default() += 1,
            // GLSL.std.450 UMin is 38.
            EXT_INST if w.get(4) == Some(&38) => *counts.entry("umin").or_default() += 1,
            SELECT => *counts.entry("select").or_default() += 1,
            UDIV | UMOD => *counts.entry("div/mod").or_default() += 1,
            BARRIER => *counts.entry("barrier").or_default() += 1,
            _ => {}
        }
        at += len.max(1);
    }
    let get = |k: &str| counts.get(k).copied().unwrap_or(0);
    format!(
        "{}/{}/{} | coop vars {} ({} loads, {} stores) | loops {} umin {} select {} div/mod {} barriers {}",
        get("coop load"),
        get("coop store"),
        get("coop muladd"),
        coop_fn_vars.len(),
        get("var load"),
        get("var store"),
        get("loop"),
        get("umin"),
        get("select"),
        get("div/mod"),
        get("barrier")
    )
}
