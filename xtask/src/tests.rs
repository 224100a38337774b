//! Tests of the tidy rules and generators, and the repository-wide checks
//! themselves, so that plain `cargo test` catches drift and tidy breakage.

use crate::{codegen, fbs, tidy, workspace_root};

#[test]
fn repository_is_tidy() {
    let problems = tidy::problems(&workspace_root());
    assert!(problems.is_empty(), "tidy problems:\n{}", problems.join("\n"));
}

#[test]
fn generated_files_have_not_drifted() {
    let problems = codegen::drift(&workspace_root()).expect("generators run");
    assert!(problems.is_empty(), "run `cargo xtask codegen`:\n{}", problems.join("\n"));
}

fn manifest(name: &str, deps: &str) -> tidy::Manifest {
    tidy::parse_manifest(&format!("[package]\nname = \"{name}\"\n\n[dependencies]\n{deps}\n"))
}

#[test]
fn upward_dependency_is_rejected() {
    let m = manifest("etwgpu-graph", "etwgpu-runtime.workspace = true\netwgpu-format.workspace = true");
    let p = tidy::check_manifests(&[m]);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("etwgpu-runtime"), "{p:?}");
}

#[test]
fn same_layer_dependency_is_rejected() {
    let p = tidy::check_manifests(&[manifest("etwgpu-kernels", "etwgpu-format = { path = \"../format\" }")]);
    assert_eq!(p.len(), 1, "{p:?}");
}

#[test]
fn wgpu_outside_runtime_is_rejected() {
    let p = tidy::check_manifests(&[manifest("etwgpu-graph", "wgpu = \"30\"")]);
    assert!(p.iter().any(|x| x.contains("wgpu")), "{p:?}");
    let ok =
        tidy::check_manifests(&[manifest("etwgpu-runtime", "wgpu.workspace = true\netwgpu-graph.workspace = true")]);
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn web_sits_on_llm_and_nothing_depends_on_it() {
    let deps = "etwgpu-llm.workspace = true\netwgpu-runtime.workspace = true\nwasm-bindgen.workspace = true";
    let ok = tidy::check_manifests(&[manifest("etwgpu-web", deps)]);
    assert!(ok.is_empty(), "{ok:?}");
    for user in ["etwgpu-llm", "etwgpu-cli"] {
        let p = tidy::check_manifests(&[manifest(user, "etwgpu-web.workspace = true")]);
        assert!(p.iter().any(|x| x.contains("etwgpu-web")), "{user}: {p:?}");
    }
    let p = tidy::check_manifests(&[manifest("etwgpu-web", "etwgpu-cli.workspace = true")]);
    assert!(p.iter().any(|x| x.contains("etwgpu-cli")), "{p:?}");
}

#[test]
fn python_sits_on_llm_and_only_it_uses_pyo3() {
    let deps = "etwgpu-llm.workspace = true\netwgpu-runtime.workspace = true\npyo3 = \"0.30\"";
    let ok = tidy::check_manifests(&[manifest("etwgpu-python", deps)]);
    assert!(ok.is_empty(), "{ok:?}");
    let p = tidy::check_manifests(&[manifest("etwgpu-llm", "etwgpu-python.workspace = true\npyo3 = \"0.30\"")]);
    assert_eq!(p.len(), 2, "{p:?}");
    let p = tidy::check_manifests(&[manifest("etwgpu-python", "etwgpu-cli.workspace = true")]);
    assert!(p.iter().any(|x| x.contains("etwgpu-cli")), "{p:?}");
}

#[test]
fn javascript_glue_outside_web_is_rejected() {
    let p = tidy::check_manifests(&[manifest("etwgpu-runtime", "wasm-bindgen = \"0.2\"\njs-sys = \"0.3\"")]);
    assert_eq!(p.len(), 2, "{p:?}");
    let wgpu = tidy::check_manifests(&[manifest("etwgpu-web", "wgpu = \"30\"")]);
    assert!(wgpu.iter().any(|x| x.contains("wgpu")), "{wgpu:?}");
}

#[test]
fn wasm_bindgen_version_is_read_from_the_lock_file() {
    let lock = "[[package]]\nname = \"wasm-bindgen-futures\"\nversion = \"0.4.1\"\n\n[[package]]\nname = \"wasm-bindgen\"\nversion = \"0.2.130\"\n";
    assert_eq!(crate::web::locked_wasm_bindgen(lock).as_deref(), Some("0.2.130"));
    assert_eq!(crate::web::locked_wasm_bindgen(""), None);
}

#[test]
fn npm_package_json_is_versioned_as_the_workspace() {
    let manifest = include_str!("../../Cargo.toml");
    let [version, license, repository] = crate::web::workspace_package(manifest).expect("the workspace manifest");
    assert!(manifest.contains(&format!("version = \"{version}\"")), "{version}");
    let json: serde_json::Value =
        serde_json::from_str(&crate::web::package_json(&version, &license, &repository)).expect("valid JSON");
    assert_eq!(json["name"], "etwgpu");
    assert_eq!(json["version"], version.as_str());
    assert_eq!(json["type"], "module");
    assert_eq!(json["exports"]["."]["types"], json["types"]);
    let files: Vec<&str> = json["files"].as_array().expect("files").iter().filter_map(|f| f.as_str()).collect();
    assert!(files.contains(&"etwgpu_web_bg.wasm") && files.contains(&"etwgpu_web.d.ts"), "{files:?}");
    let broken = "[workspace.package]\nedition = \"2024\"\n";
    assert!(crate::web::workspace_package(broken).is_err_and(|e| e.contains("version")));
}

#[test]
fn dev_dependency_section_is_checked() {
    let m = tidy::parse_manifest("[package]\nname = \"etwgpu-format\"\n[dev-dependencies]\nnaga = \"30\"\n");
    let p = tidy::check_manifests(&[m]);
    assert!(p.iter().any(|x| x.contains("naga")), "{p:?}");
}

#[test]
fn union_fields_take_two_slots() {
    let schema =
        fbs::parse("namespace t; table A {} union U { A } table T { x: int = 3; u: U; name: string; v: [A]; }")
            .expect("parses");
    let code = fbs::emit("t.fbs", &schema, &[]).expect("emits");
    assert!(code.contains("pub const X: Scalar<i32> = Scalar { slot: 0, name: \"T.x\", default: 3 };"), "{code}");
    assert!(code.contains("pub const U: Union = Union { slot: 1, name: \"T.u\" };"), "{code}");
    assert!(code.contains("slot: 3, name: \"T.name\""), "{code}");
    assert!(code.contains("pub const V: Offset<[Tbl]> = Offset { slot: 4"), "{code}");
}

#[test]
fn enum_defaults_resolve_by_name() {
    let schema =
        fbs::parse("namespace t; enum E : ubyte { A = 1, B = 255 } table T { e: E = B; f: E; }").expect("parses");
    let code = fbs::emit("t.fbs", &schema, &[]).expect("emits");
    assert!(code.contains("pub const E: Scalar<u8> = Scalar { slot: 0, name: \"T.e\", default: 255 };"), "{code}");
    assert!(code.contains("pub const F: Scalar<u8> = Scalar { slot: 1, name: \"T.f\", default: 0 };"), "{code}");
}

#[test]
fn unknown_schema_constructs_fail() {
    assert!(fbs::parse("struct S { x: int; }").is_err());
    let schema = fbs::parse("namespace t; table T { x: Missing; }").expect("parses");
    assert!(fbs::emit("t.fbs", &schema, &[]).is_err());
}

#[test]
fn wgsl_variants_validate() {
    let problems = crate::wgsl::validate_all(&workspace_root()).expect("WGSL sources readable");
    assert!(problems.is_empty(), "invalid WGSL:\n{}", problems.join("\n"));
}

#[test]
fn wgsl_conventions_are_enforced() {
    let ok = "//! doc\n// variants: f32 f16\nalias Elem = f32;\n";
    let fam = crate::wgsl::parse_family("x", ok.to_string()).expect("valid");
    assert_eq!(fam.variants, ["f32", "f16"]);
    let f16 = crate::wgsl::variant_source(&fam, "f16");
    assert!(f16.starts_with("enable f16;") && f16.contains("alias Elem = f16;"), "{f16}");
    assert!(crate::wgsl::parse_family("x", "// no doc\n// variants: f32\nalias Elem = f32;\n".into()).is_err());
    assert!(crate::wgsl::parse_family("x", "//! d\n// variants: f32\n".into()).is_err());
    assert!(crate::wgsl::parse_family("x", "//! d\n// variants: f64\nalias Elem = f32;\n".into()).is_err());
    assert!(crate::wgsl::parse_family("x", "//! d\n#define A\n// variants: f32\nalias Elem = f32;\n".into()).is_err());
}

/// `// bounds: host-checked` is read into the family, needs its `//!
/// Bounds:` reason, takes that one value, appears once, and never in a
/// snippet.
#[test]
fn wgsl_bounds_marker_needs_its_reason() {
    let parse = |src: &str| crate::wgsl::parse_family("x", src.to_string());
    let plain = parse("//! d\n// variants: f32\nalias Elem = f32;\n").expect("valid");
    assert!(!plain.bounds_host_checked);
    let marked = "//! d\n//! Bounds: `t` by `lid`.\n// variants: f32\n// bounds: host-checked\nalias Elem = f32;\n";
    assert!(parse(marked).expect("valid").bounds_host_checked);
    let no_reason =
        parse("//! d\n// variants: f32\n// bounds: host-checked\nalias Elem = f32;\n").expect_err("no reason");
    assert!(no_reason.contains("Bounds:"), "{no_reason}");
    assert!(parse(&marked.replace("host-checked", "trust me")).is_err());
    assert!(parse(&format!("{marked}// bounds: host-checked\n")).is_err());
    assert!(crate::wgsl::parse_snippet("s.wgsl", "//! d\n// bounds: host-checked\n").is_err());
    let code = crate::wgsl::emit(&[plain, parse(marked).expect("valid")], &|_| crate::wgsl::WEBGPU_LIMITS);
    assert!(code.contains("matches!(self, Family::X)"), "{code}");
}

/// `// loop-guard: on` is read into the family, needs its `//! Loop
/// guard:` timing, takes that one value, appears once, never in a
/// snippet, and is independent of the bounds marker.
#[test]
fn wgsl_loop_guard_marker_needs_its_timing() {
    let parse = |src: &str| crate::wgsl::parse_family("x", src.to_string());
    let plain = parse("//! d\n// variants: f32\nalias Elem = f32;\n").expect("valid");
    assert!(!plain.loop_guard);
    let marked = "//! d\n//! Loop guard: 1.2x on Y.\n// variants: f32\n// loop-guard: on\nalias Elem = f32;\n";
    let family = parse(marked).expect("valid");
    assert!(family.loop_guard && !family.bounds_host_checked);
    let no_reason = parse("//! d\n// variants: f32\n// loop-guard: on\nalias Elem = f32;\n").expect_err("no timing");
    assert!(no_reason.contains("Loop guard:"), "{no_reason}");
    assert!(parse(&marked.replace("loop-guard: on", "loop-guard: off")).is_err());
    assert!(parse(&format!("{marked}// loop-guard: on\n")).is_err());
    assert!(crate::wgsl::parse_snippet("s.wgsl", "//! d\n// loop-guard: on\n").is_err());
    let code = crate::wgsl::emit(&[plain, family], &|_| crate::wgsl::WEBGPU_LIMITS);
    let guard = code.split("pub const fn loop_guard").nth(1).expect("Family::loop_guard is generated");
    assert!(guard.split("\n    }").next().is_some_and(|body| body.contains("matches!(self, Family::X)")), "{code}");
}

#[test]
fn shader_needs_are_read_and_checked_against_webgpu_limits() {
    let storage: String =
        (0..9).map(|i| format!("@group(0) @binding({i}) var<storage, read_write> b{i}: array<f32>;\n")).collect();
    let uses: String = (0..9).map(|i| format!("    b{i}[0] = 0.0;\n")).collect();
    let src = format!(
        "{storage}override WG: u32 = 512u;\nvar<workgroup> t: array<f32, 8192>;\n\
         @compute @workgroup_size(WG)\nfn main() {{\n{uses}    t[0] = 1.0;\n}}\n"
    );
    let needs = crate::wgsl::validate_source("big", &src).expect("valid WGSL");
    assert_eq!(needs.workgroup_size, [512, 1, 1]);
    assert_eq!((needs.storage_buffers, needs.uniform_buffers, needs.workgroup_bytes), (9, 0, 32768));
    let over = crate::wgsl::over_webgpu_limits(&needs);
    assert_eq!(over.len(), 4, "{over:?}");
    let small =
        crate::wgsl::validate_source("small", "@compute @workgroup_size(16, 16)\nfn main() {}\n").expect("valid");
    assert_eq!(small.workgroup_size, [16, 16, 1]);
    assert!(crate::wgsl::over_webgpu_limits(&small).is_empty());
}

#[test]
fn naga_rejects_broken_wgsl() {
    assert!(crate::wgsl::validate_source("bad", "fn f( {").is_err());
    assert!(crate::wgsl::validate_source("bad", "fn f() -> u32 { return 1.5; }").is_err());
}

#[test]
fn wgsl_includes_expand_once_and_name_what_is_wrong() {
    use std::collections::{BTreeMap, BTreeSet};
    let snippet = crate::wgsl::parse_snippet("s.wgsl", "//! doc\n//! more\n\nfn s() -> f32 { return 1.0; }\n")
        .expect("valid snippet");
    assert_eq!(snippet, "fn s() -> f32 { return 1.0; }\n");
    let snippets = BTreeMap::from([("s.wgsl".to_string(), snippet)]);
    let mut used = BTreeSet::new();
    let src = "//! d\n// variants: f32\nalias Elem = f32;\n// include: s.wgsl\nfn main() {}\n";
    let out = crate::wgsl::expand_includes("x", src, &snippets, &mut used).expect("expands");
    assert_eq!(out, "//! d\n// variants: f32\nalias Elem = f32;\nfn s() -> f32 { return 1.0; }\nfn main() {}\n");
    assert!(used.contains("s.wgsl"));
    let missing = crate::wgsl::expand_includes("x", "// include: t.wgsl\n", &snippets, &mut used).expect_err("missing");
    assert!(missing.contains("x.wgsl:1") && missing.contains("t.wgsl"), "{missing}");
    let twice = "// include: s.wgsl\n// include: s.wgsl\n";
    let err = crate::wgsl::expand_includes("x", twice, &snippets, &mut used).expect_err("twice");
    assert!(err.contains("x.wgsl:2"), "{err}");
    for bad in ["fn f() {}\n", "//! d\n// include: s.wgsl\n", "//! d\n// variants: f32\n", "//! d\nalias Elem = f32;\n"]
    {
        assert!(crate::wgsl::parse_snippet("b.wgsl", bad).is_err(), "{bad:?}");
    }
}

/// A workspace dependency no source names is reported; one a source names
/// is not.
#[test]
fn unused_dependency_is_rejected() {
    let dir = std::env::temp_dir().join(format!("etwgpu-tidy-unused-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src")).expect("temp dir");
    std::fs::write(dir.join("src/lib.rs"), "//! x\nuse etwgpu_runtime::Runtime;\n").expect("writes");
    let m = manifest("etwgpu-llm", "etwgpu-runtime.workspace = true\netwgpu-graph.workspace = true");
    let p = tidy::unused_dependencies(&dir, &m);
    std::fs::remove_dir_all(&dir).expect("cleans up");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("etwgpu-graph"), "{p:?}");
}
