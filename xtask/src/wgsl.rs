//! WGSL shader generation and validation.
//!
//! Every `crates/kernels/wgsl/<family>.wgsl` declares its element-type
//! variants on a `// variants: f32 f16` line and its element type on exactly
//! one `alias Elem = f32;` line. A variant is the source with that line
//! replaced (plus `enable f16;` in front for `f16`). A source that reads a KV cache may also carry one
//! `alias KvElem = Elem;` line: its variants may then be named
//! `<elem>_kv<kv elem>` (`f32_kvf16`: f32 activations over a float16 cache),
//! which sets that line to the cache's type. The variants become one `pub const` string each in
//! `crates/kernels/src/generated/shaders.rs`, with a [`ShaderId`]-style index
//! and what each needs of the device ([`Needs`]: workgroup size, bindings,
//! workgroup memory), which the runtime checks against the adapter's limits
//! at load. Every variant must fit WebGPU's guaranteed limits
//! ([`WEBGPU_LIMITS`]), so it runs on any WebGPU device, browsers included,
//! except the few the graph picks only where the device allows them
//! ([`LIMIT_GATED`]).
//!
//! Code that several families share is written once, in a snippet
//! `crates/kernels/wgsl/common/<name>.wgsl` (`act.wgsl`: the unary ops and
//! activations), and a family takes it with a `// include: <name>.wgsl`
//! line, which [`expand_includes`] replaces with the snippet's text (its
//! leading `//!` lines dropped) before anything else reads the source:
//! naga validation, the generated constants and so the drift check all see
//! the expanded text. Snippets include nothing themselves and carry no
//! `variants:`, `bounds:` or `Elem` line; a snippet no family includes is
//! an error. There is no other preprocessing.
//!
//! A family may also carry one `// bounds: host-checked` line: the claim
//! that every index into its fixed-size arrays (workgroup memory, private
//! arrays, vectors, matrices) stays in bounds, bounded by a constant or by
//! a uniform its host rule checks, so the runtime may create it without
//! naga's index clamps for programs the user trusts
//! (`LoadOptions::trusted_shaders`). Such a family must justify it in a
//! `//! Bounds:` paragraph of its docs; the generated
//! `Family::bounds_host_checked` carries the claim.
//!
//! A family may carry one `// loop-guard: on` line: the runtime then
//! creates it with naga's loop guard (a counter that ends any loop after
//! 2^64 iterations) whatever `ETWGPU_SHADER_CHECKS` says, because the
//! guard was measured to make the driver schedule it faster. It changes no
//! result. Such a family must give the measurement in a `//! Loop guard:`
//! paragraph; the generated `Family::loop_guard` carries the choice.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::codegen::Outputs;

/// Where the WGSL sources live, relative to the root.
const SOURCE_DIR: &str = "crates/kernels/wgsl";
/// Where the shared snippets live, relative to [`SOURCE_DIR`].
const SNIPPET_DIR: &str = "common";
/// The line that includes a snippet: `// include: act.wgsl`.
const INCLUDE_PREFIX: &str = "// include:";
/// The element-type line every source must contain exactly once.
const ELEM_LINE: &str = "alias Elem = f32;";
/// The optional KV-cache element-type line (see the module docs).
const KV_ELEM_LINE: &str = "alias KvElem = Elem;";
/// The optional line marking a family's fixed-size array indices as proven
/// in bounds by its host rule (see the module docs).
const BOUNDS_PREFIX: &str = "// bounds:";
/// The one value [`BOUNDS_PREFIX`] takes.
const BOUNDS_HOST_CHECKED: &str = "host-checked";
/// The doc paragraph a family with a [`BOUNDS_PREFIX`] line must have.
const BOUNDS_DOC: &str = "//! Bounds:";
/// The optional line asking for naga's loop guard (see the module docs).
const LOOP_GUARD_PREFIX: &str = "// loop-guard:";
/// The one value [`LOOP_GUARD_PREFIX`] takes.
const LOOP_GUARD_ON: &str = "on";
/// The doc paragraph a family with a [`LOOP_GUARD_PREFIX`] line must have.
const LOOP_GUARD_DOC: &str = "//! Loop guard:";
/// Element types a variant may name.
const KNOWN_VARIANTS: &[&str] = &["f32", "f16", "i32", "u32"];
/// Element types a variant's KV cache may have.
const KNOWN_KV_VARIANTS: &[&str] = &["f32", "f16"];

/// A variant name split into its element type and its KV-cache element
/// type (`f32_kvf16` -> `("f32", Some("f16"))`).
fn split_variant(variant: &str) -> (&str, Option<&str>) {
    match variant.split_once("_kv") {
        Some((elem, kv)) => (elem, Some(kv)),
        None => (variant, None),
    }
}

/// What one shader variant needs of the device, read by naga.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// `@workgroup_size` of `main`, overrides at their defaults.
    pub workgroup_size: [u32; 3],
    /// Storage buffers bound.
    pub storage_buffers: u32,
    /// Uniform buffers bound.
    pub uniform_buffers: u32,
    /// Bytes of `var<workgroup>` memory.
    pub workgroup_bytes: u32,
}

/// WebGPU's default limits, which every WebGPU device supports (per
/// dimension workgroup sizes, bindings per shader stage, workgroup memory).
pub const WEBGPU_LIMITS: Needs =
    Needs { workgroup_size: [256, 256, 64], storage_buffers: 8, uniform_buffers: 12, workgroup_bytes: 16384 };

/// Families the graph picks only when the device's limits allow them (the
/// fusion pass checks `max_storage_buffers_per_shader_stage` before fusing
/// three projections into one dispatch, or an RMS norm into the QKV or
/// SwiGLU GEMV; the decode attention computed in the O projection's GEMV
/// runs only where `DeviceCaps::gemv_attention` says the device allows
/// its buffers; the cooperative-matrix GEMMs run
/// only on devices that have cooperative matrices, which allow more
/// workgroup memory), so they may need more than WebGPU guarantees; the
/// runtime still checks their needs at load. Validation runs with every
/// naga capability on, cooperative matrices included.
pub const LIMIT_GATED: &[&str] = &[
    "conv_gemm_coop",
    "gemv_qkv",
    "gemv_qkv_norm_vec4",
    "gemv_qkv_vec4",
    "gemv_swiglu_norm_vec4",
    "linear_gemv_sdpa",
    "linear_qkv",
    "linear_q4gsw_qkv",
    "matmul_coop",
    "matmul_coop_large",
    "q4_gemm_coop",
    "q4_gemm_coop_large",
    "q4_gemm_coop_large_splitk",
    "q4_gemm_coop_qkv",
    "q4_gemm_coop_qkv_large",
    "q4_gemm_coop_splitk",
    "q4_gemm_coop_swiglu",
    "q4_gemm_coop_swiglu_large",
    "q4_gemm_qkv",
    "q4_gemv_qkv",
    "q4_gemv_attn_i8",
    "q4_gemv_qkv_norm",
    "q4_gemv_qkv_norm_i8",
    "q4_gemv_sdpa",
    "q4_gemv_swiglu_norm",
    "q4_gemv_swiglu_norm_i8",
    "sdpa_prefill_coop",
];

/// Invocations per workgroup WebGPU guarantees.
pub const WEBGPU_INVOCATIONS: u32 = 256;

/// Reads what entry point `main` of a validated module needs.
fn needs_of(label: &str, module: &naga::Module) -> Result<Needs, String> {
    let ep = module
        .entry_points
        .iter()
        .find(|e| e.name == "main" && e.stage == naga::ShaderStage::Compute)
        .ok_or_else(|| format!("{label}: no `@compute fn main`"))?;
    let mut workgroup_size = ep.workgroup_size;
    if let Some(overrides) = &ep.workgroup_size_overrides {
        for (dim, expr) in overrides.iter().enumerate() {
            let Some(expr) = expr else { continue };
            let value = match module.global_expressions[*expr] {
                naga::Expression::Override(o) => module.overrides[o].init.map(|i| &module.global_expressions[i]),
                ref e => Some(e),
            };
            workgroup_size[dim] = match value {
                Some(naga::Expression::Literal(naga::Literal::U32(v))) => *v,
                Some(naga::Expression::Literal(naga::Literal::I32(v))) => u32::try_from(*v).unwrap_or(u32::MAX),
                Some(naga::Expression::Literal(naga::Literal::AbstractInt(v))) => u32::try_from(*v).unwrap_or(u32::MAX),
                _ => return Err(format!("{label}: workgroup size {dim} is not a literal or an override with one")),
            };
        }
    }
    let mut needs = Needs { workgroup_size, storage_buffers: 0, uniform_buffers: 0, workgroup_bytes: 0 };
    let ctx = module.to_ctx();
    for (_, var) in module.global_variables.iter() {
        match var.space {
            naga::AddressSpace::Storage { .. } => needs.storage_buffers += 1,
            naga::AddressSpace::Uniform => needs.uniform_buffers += 1,
            naga::AddressSpace::WorkGroup => needs.workgroup_bytes += module.types[var.ty].inner.size(ctx),
            _ => {}
        }
    }
    Ok(needs)
}

/// What a variant needs beyond WebGPU's guaranteed limits, if anything.
pub fn over_webgpu_limits(n: &Needs) -> Vec<String> {
    let l = WEBGPU_LIMITS;
    let invocations = n.workgroup_size.iter().product::<u32>();
    let mut out = Vec::new();
    if invocations > WEBGPU_INVOCATIONS {
        out.push(format!("{invocations} invocations per workgroup (WebGPU guarantees {WEBGPU_INVOCATIONS})"));
    }
    for (dim, (&n, &l)) in n.workgroup_size.iter().zip(&l.workgroup_size).enumerate() {
        if n > l {
            out.push(format!("workgroup size {n} in dimension {dim} (WebGPU guarantees {l})"));
        }
    }
    for (what, n, l) in [
        ("storage buffers", n.storage_buffers, l.storage_buffers),
        ("uniform buffers", n.uniform_buffers, l.uniform_buffers),
        ("bytes of workgroup memory", n.workgroup_bytes, l.workgroup_bytes),
    ] {
        if n > l {
            out.push(format!("{n} {what} (WebGPU guarantees {l})"));
        }
    }
    out
}

/// One shader family: a source file and its variants.
#[derive(Debug, Clone)]
pub struct Family {
    /// File stem, e.g. `binary`.
    pub name: String,
    /// The source text.
    pub source: String,
    /// Variant names in the order of the `variants:` line.
    pub variants: Vec<String>,
    /// Whether it carries `// bounds: host-checked`.
    pub bounds_host_checked: bool,
    /// Whether it carries `// loop-guard: on`.
    pub loop_guard: bool,
}

/// The `.wgsl` files directly in `dir`, sorted.
fn wgsl_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "wgsl"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// Every shared snippet in `common/`, by file name (`act.wgsl`), with its
/// text as it is included (leading `//!` lines dropped), checked.
fn snippets(root: &Path) -> Result<BTreeMap<String, String>, String> {
    let dir = root.join(SOURCE_DIR).join(SNIPPET_DIR);
    if !dir.exists() {
        return Ok(BTreeMap::new());
    }
    let mut out = BTreeMap::new();
    for path in wgsl_files(&dir)? {
        let file = path.file_name().and_then(|n| n.to_str()).ok_or("bad WGSL snippet name")?.to_string();
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        out.insert(file.clone(), parse_snippet(&file, &text)?);
    }
    Ok(out)
}

/// Checks one snippet's conventions; returns the text a family's include
/// line becomes (the leading `//!` lines and the blank lines after them
/// dropped).
pub fn parse_snippet(file: &str, text: &str) -> Result<String, String> {
    if !text.starts_with("//!") {
        return Err(format!("{SNIPPET_DIR}/{file}: must start with `//!` doc lines"));
    }
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with(INCLUDE_PREFIX)
            || t.starts_with("// variants:")
            || t.starts_with(BOUNDS_PREFIX)
            || t.starts_with(LOOP_GUARD_PREFIX)
            || t == ELEM_LINE
            || t == KV_ELEM_LINE
        {
            return Err(format!(
                "{SNIPPET_DIR}/{file}: a snippet has no `{INCLUDE_PREFIX}`, `// variants:`, `{BOUNDS_PREFIX}`, \
                 `{LOOP_GUARD_PREFIX}`, `Elem` or `KvElem` line: `{t}`"
            ));
        }
    }
    let body: Vec<&str> =
        text.lines().skip_while(|l| l.starts_with("//!")).skip_while(|l| l.trim().is_empty()).collect();
    Ok(body.iter().map(|l| format!("{l}\n")).collect())
}

/// Replaces each `// include: <name>.wgsl` line of `source` with that
/// snippet's text; records in `used` which snippets it took. A snippet
/// included twice, or one that does not exist, is an error naming the line.
pub fn expand_includes(
    name: &str,
    source: &str,
    snippets: &BTreeMap<String, String>,
    used: &mut std::collections::BTreeSet<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(source.len());
    let mut taken = std::collections::BTreeSet::new();
    for (line_idx, line) in source.lines().enumerate() {
        let Some(file) = line.trim().strip_prefix(INCLUDE_PREFIX).map(str::trim) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let at = format!("{name}.wgsl:{}", line_idx + 1);
        let text = snippets
            .get(file)
            .ok_or_else(|| format!("{at}: no snippet `{SNIPPET_DIR}/{file}` (known: {:?})", snippets.keys()))?;
        if !taken.insert(file.to_string()) {
            return Err(format!("{at}: `{file}` is already included"));
        }
        used.insert(file.to_string());
        out.push_str(text);
    }
    Ok(out)
}

/// Reads and checks every WGSL source, sorted by name, with its includes
/// expanded.
pub fn families(root: &Path) -> Result<Vec<Family>, String> {
    let snippets = snippets(root)?;
    let mut used = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for path in wgsl_files(&root.join(SOURCE_DIR))? {
        let name = path.file_stem().and_then(|n| n.to_str()).ok_or("bad WGSL file name")?.to_string();
        if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            return Err(format!("{name}.wgsl: family names are snake_case"));
        }
        let raw = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let source = expand_includes(&name, &raw, &snippets, &mut used)?;
        let family = parse_family(&name, source)?;
        out.push(family);
    }
    if let Some(unused) = snippets.keys().find(|k| !used.contains(*k)) {
        return Err(format!("{SNIPPET_DIR}/{unused}: no family includes it"));
    }
    Ok(out)
}

/// Checks the conventions of one source and reads its variants.
pub fn parse_family(name: &str, source: String) -> Result<Family, String> {
    if !source.starts_with("//!") {
        return Err(format!("{name}.wgsl: must start with `//!` doc lines"));
    }
    if source.lines().any(|l| l.trim_start().starts_with('#')) {
        return Err(format!("{name}.wgsl: no preprocessor directives"));
    }
    let n_elem = source.lines().filter(|l| l.trim() == ELEM_LINE).count();
    if n_elem != 1 {
        return Err(format!("{name}.wgsl: expected exactly one `{ELEM_LINE}` line, found {n_elem}"));
    }
    let variant_lines: Vec<&str> =
        source.lines().filter_map(|l| l.trim().strip_prefix("// variants:")).map(str::trim).collect();
    let [line] = variant_lines.as_slice() else {
        return Err(format!("{name}.wgsl: expected one `// variants:` line, found {}", variant_lines.len()));
    };
    let variants: Vec<String> = line.split_whitespace().map(String::from).collect();
    if variants.is_empty() {
        return Err(format!("{name}.wgsl: empty `// variants:` line"));
    }
    let n_kv = source.lines().filter(|l| l.trim() == KV_ELEM_LINE).count();
    if n_kv > 1 {
        return Err(format!("{name}.wgsl: expected at most one `{KV_ELEM_LINE}` line, found {n_kv}"));
    }
    for v in &variants {
        let (elem, kv) = split_variant(v);
        if !KNOWN_VARIANTS.contains(&elem) {
            return Err(format!("{name}.wgsl: unknown variant `{v}` (known: {KNOWN_VARIANTS:?})"));
        }
        if let Some(kv) = kv {
            if n_kv == 0 {
                return Err(format!("{name}.wgsl: variant `{v}` needs one `{KV_ELEM_LINE}` line"));
            }
            if !KNOWN_KV_VARIANTS.contains(&kv) || !KNOWN_KV_VARIANTS.contains(&elem) {
                return Err(format!("{name}.wgsl: unknown KV-cache variant `{v}` (known: {KNOWN_KV_VARIANTS:?})"));
            }
        }
    }
    let bounds_host_checked = parse_marker(
        name,
        &source,
        Marker { prefix: BOUNDS_PREFIX, value: BOUNDS_HOST_CHECKED, doc: BOUNDS_DOC, why: BOUNDS_WHY },
    )?;
    let loop_guard = parse_marker(
        name,
        &source,
        Marker { prefix: LOOP_GUARD_PREFIX, value: LOOP_GUARD_ON, doc: LOOP_GUARD_DOC, why: LOOP_GUARD_WHY },
    )?;
    Ok(Family { name: name.to_string(), source, variants, bounds_host_checked, loop_guard })
}

/// What a [`BOUNDS_DOC`] paragraph must say.
const BOUNDS_WHY: &str = "which constant or host-checked uniform bounds each fixed-size array index";
/// What a [`LOOP_GUARD_DOC`] paragraph must say.
const LOOP_GUARD_WHY: &str = "the timing that shows the guard makes it faster";

/// An optional one-value marker line of a family and the doc paragraph
/// that must justify it.
struct Marker {
    prefix: &'static str,
    value: &'static str,
    doc: &'static str,
    why: &'static str,
}

/// Reads a family's optional marker line (`// bounds: host-checked`,
/// `// loop-guard: on`): at most one, with its one value, and only beside
/// its doc paragraph saying why.
fn parse_marker(name: &str, source: &str, m: Marker) -> Result<bool, String> {
    let Marker { prefix, value, doc, why } = m;
    let lines: Vec<&str> = source.lines().filter_map(|l| l.trim().strip_prefix(prefix)).map(str::trim).collect();
    match lines[..] {
        [] => Ok(false),
        [v] if v == value && source.lines().any(|l| l.starts_with(doc)) => Ok(true),
        [v] if v == value => Err(format!("{name}.wgsl: `{prefix} {value}` needs a `{doc}` doc paragraph saying {why}")),
        [other] => Err(format!("{name}.wgsl: `{prefix}` takes `{value}`, not `{other}`")),
        _ => Err(format!("{name}.wgsl: expected at most one `{prefix}` line, found {}", lines.len())),
    }
}

/// The source of one variant: the `Elem` line substituted (and the
/// `KvElem` line, for a `<elem>_kv<kv elem>` variant).
pub fn variant_source(family: &Family, variant: &str) -> String {
    let (elem, kv) = split_variant(variant);
    let mut text = String::new();
    if elem == "f16" || kv == Some("f16") {
        text.push_str("enable f16;\n\n");
    }
    for line in family.source.lines() {
        if line.trim() == ELEM_LINE {
            text.push_str(&format!("alias Elem = {elem};\n"));
        } else if let (Some(kv), true) = (kv, line.trim() == KV_ELEM_LINE) {
            text.push_str(&format!("alias KvElem = {kv};\n"));
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// `Elem = f32` (and `, KvElem = f16` for a KV-cache variant), for docs.
fn variant_doc(variant: &str) -> String {
    match split_variant(variant) {
        (elem, Some(kv)) => format!("`Elem = {elem}`, `KvElem = {kv}`"),
        (elem, None) => format!("`Elem = {elem}`"),
    }
}

/// The body and closing brace of a generated `const fn(self) -> bool` that
/// is true for the `Family::X` paths in `marked`.
fn push_matches(s: &mut String, marked: &[String]) {
    if marked.is_empty() {
        s.push_str("        let _ = self;\n        false\n    }\n");
    } else {
        s.push_str(&format!("        matches!(self, {})\n    }}\n", marked.join(" | ")));
    }
}

fn camel(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

fn raw_string(text: &str) -> String {
    let mut hashes = String::from("#");
    while text.contains(&format!("\"{hashes}")) {
        hashes.push('#');
    }
    format!("r{hashes}\"{text}\"{hashes}")
}

/// Emits `shaders.rs` for the given families (the variants' needs given
/// by `needs`, by label such as `binary.f32`).
pub fn emit(families: &[Family], needs: &dyn Fn(&str) -> Needs) -> String {
    let mut all_variants: Vec<&str> =
        families.iter().flat_map(|f| f.variants.iter().map(String::as_str)).collect::<Vec<_>>();
    all_variants.sort();
    all_variants.dedup();
    let ids: Vec<(&Family, &str, String)> = families
        .iter()
        .flat_map(|f| f.variants.iter().map(move |v| (f, v.as_str(), format!("{}{}", camel(&f.name), camel(v)))))
        .collect();

    let mut s = String::from(
        "//! Every WGSL shader variant, one `pub const` source per (family, variant), and\n\
         //! their index [`ShaderId`].\n//!\n\
         //! Generated by `cargo xtask codegen` from `crates/kernels/wgsl/`; do not edit.\n\n",
    );
    s.push_str("/// A shader family: one file in `crates/kernels/wgsl/`.\n");
    s.push_str("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub enum Family {\n");
    for f in families {
        s.push_str(&format!("    /// `{}.wgsl`.\n    {},\n", f.name, camel(&f.name)));
    }
    s.push_str("}\n\n");
    s.push_str(
        "impl Family {\n    \
         /// Whether its source carries `// bounds: host-checked`: every index\n    \
         /// into its fixed-size arrays (workgroup memory, private arrays,\n    \
         /// vectors) is bounded by a constant or by a uniform its host rule\n    \
         /// checks (the source's `Bounds:` docs say which), so a trusted load\n    \
         /// may create it without the index clamps.\n    \
         pub const fn bounds_host_checked(self) -> bool {\n",
    );
    let marked: Vec<String> =
        families.iter().filter(|f| f.bounds_host_checked).map(|f| format!("Family::{}", camel(&f.name))).collect();
    push_matches(&mut s, &marked);
    s.push_str(
        "\n    /// Whether its source carries `// loop-guard: on`: the runtime creates\n    \
         /// it with naga's loop guard whatever `ETWGPU_SHADER_CHECKS` says (its\n    \
         /// `Loop guard:` docs give the timing that chose it).\n    \
         pub const fn loop_guard(self) -> bool {\n",
    );
    let guarded: Vec<String> =
        families.iter().filter(|f| f.loop_guard).map(|f| format!("Family::{}", camel(&f.name))).collect();
    push_matches(&mut s, &guarded);
    s.push_str("}\n\n");
    s.push_str("/// The element type a variant was generated for (`alias Elem = ...;`).\n");
    s.push_str("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub enum Variant {\n");
    for v in &all_variants {
        s.push_str(&format!("    /// {}.\n    {},\n", variant_doc(v), camel(v)));
    }
    s.push_str("}\n\n");
    s.push_str(
        "/// What a shader needs of the device; the runtime checks it against the\n\
         /// adapter's limits before creating the pipeline.\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq)]\npub struct ShaderNeeds {\n    \
         /// `@workgroup_size` of `main`.\n    pub workgroup_size: [u32; 3],\n    \
         /// Storage buffers bound.\n    pub storage_buffers: u32,\n    \
         /// Uniform buffers bound.\n    pub uniform_buffers: u32,\n    \
         /// Bytes of `var<workgroup>` memory.\n    pub workgroup_bytes: u32,\n}\n\n",
    );
    s.push_str("/// One generated shader: a family compiled for one variant.\n");
    s.push_str("#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub enum ShaderId {\n");
    for (f, v, id) in &ids {
        s.push_str(&format!("    /// `{}.wgsl` with {}.\n    {id},\n", f.name, variant_doc(v)));
    }
    s.push_str("}\n\n");
    s.push_str(
        "impl ShaderId {\n    /// Every shader, in family then variant order.\n    pub const ALL: &[ShaderId] = &[",
    );
    for (_, _, id) in &ids {
        s.push_str(&format!("ShaderId::{id}, "));
    }
    s.push_str("];\n\n");
    s.push_str("    /// Its family.\n    pub const fn family(self) -> Family {\n        match self {\n");
    for (f, _, id) in &ids {
        s.push_str(&format!("            ShaderId::{id} => Family::{},\n", camel(&f.name)));
    }
    s.push_str("        }\n    }\n\n");
    s.push_str(
        "    /// Whether its family's fixed-size array indices are proven in bounds by\n    \
         /// the host rule ([`Family::bounds_host_checked`]).\n    \
         pub const fn bounds_host_checked(self) -> bool {\n        self.family().bounds_host_checked()\n    }\n\n\
         /// Whether the runtime creates it with naga's loop guard whatever\n    \
         /// `ETWGPU_SHADER_CHECKS` says ([`Family::loop_guard`]).\n    \
         pub const fn loop_guard(self) -> bool {\n        self.family().loop_guard()\n    }\n\n",
    );
    s.push_str("    /// Its variant.\n    pub const fn variant(self) -> Variant {\n        match self {\n");
    for (_, v, id) in &ids {
        s.push_str(&format!("            ShaderId::{id} => Variant::{},\n", camel(v)));
    }
    s.push_str("        }\n    }\n\n");
    s.push_str(
        "    /// A label such as `binary.f32`.\n    pub const fn label(self) -> &'static str {\n        match self {\n",
    );
    for (f, v, id) in &ids {
        s.push_str(&format!("            ShaderId::{id} => \"{}.{v}\",\n", f.name));
    }
    s.push_str("        }\n    }\n\n");
    s.push_str("    /// The WGSL source.\n    pub const fn source(self) -> &'static str {\n        match self {\n");
    for (f, v, id) in &ids {
        s.push_str(&format!("            ShaderId::{id} => {}_{},\n", f.name.to_uppercase(), v.to_uppercase()));
    }
    s.push_str("        }\n    }\n\n");
    s.push_str(
        "    /// What it needs of the device (workgroup size, bindings, workgroup\n    \
         /// memory), as naga reads it (overrides at their defaults).\n    \
         pub const fn needs(self) -> ShaderNeeds {\n        match self {\n",
    );
    for (f, v, id) in &ids {
        let n = needs(&format!("{}.{v}", f.name));
        s.push_str(&format!(
            "            ShaderId::{id} => ShaderNeeds {{ workgroup_size: {:?}, storage_buffers: {}, uniform_buffers: {}, workgroup_bytes: {} }},\n",
            n.workgroup_size, n.storage_buffers, n.uniform_buffers, n.workgroup_bytes
        ));
    }
    s.push_str("        }\n    }\n\n");
    s.push_str(
        "    /// The shader of `family` for `variant`, if that variant exists.\n    \
         pub const fn find(family: Family, variant: Variant) -> Option<ShaderId> {\n        match (family, variant) {\n",
    );
    for (f, v, id) in &ids {
        s.push_str(&format!(
            "            (Family::{}, Variant::{}) => Some(ShaderId::{id}),\n",
            camel(&f.name),
            camel(v)
        ));
    }
    s.push_str("            _ => None,\n        }\n    }\n}\n\n");
    for (f, v, _) in &ids {
        s.push_str(&format!(
            "/// `{}.wgsl` with {}.\npub const {}_{}: &str = {};\n\n",
            f.name,
            variant_doc(v),
            f.name.to_uppercase(),
            v.to_uppercase(),
            raw_string(&variant_source(f, v))
        ));
    }
    s
}

/// Adds the generated shader files to `out`.
pub fn outputs(root: &Path, out: &mut Outputs) -> Result<(), String> {
    let families = families(root)?;
    let mut needs = std::collections::BTreeMap::new();
    for family in &families {
        for v in &family.variants {
            let label = format!("{}.{v}", family.name);
            let n = validate_source(&label, &variant_source(family, v))?;
            needs.insert(label, n);
        }
    }
    let lookup = |label: &str| needs[label];
    out.insert(PathBuf::from("crates/kernels/src/generated/shaders.rs"), emit(&families, &lookup));
    out.insert(
        PathBuf::from("crates/kernels/src/generated.rs"),
        "//! Generated code: WGSL shader variants.\n//!\n//! Generated by `cargo xtask codegen`; do not edit.\n\npub mod shaders;\n"
            .to_string(),
    );
    Ok(())
}

/// Parses and validates one WGSL source with naga; returns what its
/// `main` needs of the device.
pub fn validate_source(label: &str, source: &str) -> Result<Needs, String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| format!("{label}: {}", e.emit_to_string(source)))?;
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| format!("{label}: {}", e.emit_to_string(source)))?;
    needs_of(label, &module)
}

/// Validates every variant of every family and checks it fits WebGPU's
/// guaranteed limits; lists the failures.
pub fn validate_all(root: &Path) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    for family in families(root)? {
        for v in &family.variants {
            let label = format!("{}.wgsl [{v}]", family.name);
            match validate_source(&label, &variant_source(&family, v)) {
                Ok(_) if LIMIT_GATED.contains(&family.name.as_str()) => {}
                Ok(needs) => problems.extend(over_webgpu_limits(&needs).into_iter().map(|p| format!("{label}: {p}"))),
                Err(e) => problems.push(e),
            }
        }
    }
    Ok(problems)
}
