//! Tidy checks: the layout and dependency rules of the house style.
//!
//! - workspace crates depend only downwards:
//!   format, kernels < graph < runtime < llm < cli, web (the browser API),
//!   python (the Python package); nothing depends on those three;
//! - `wgpu` only in `runtime` (and the `cli` binary, which drives it through
//!   `runtime` only, so not even there), `flatbuffers` only in `format`,
//!   `naga` only in `xtask` and as a `kernels` dev-dependency; the
//!   JavaScript glue (`wasm-bindgen`, `wasm-bindgen-futures`, `js-sys`,
//!   `wasm-bindgen-test`) only in `web`; `pyo3` only in `python`;
//! - no unused workspace dependency: a crate that declares `etwgpu-x` in
//!   `[dependencies]` names `etwgpu_x` in its `src/`, and one in
//!   `[dev-dependencies]` names it in `src/`, `tests/`, `benches/` or
//!   `examples/`;
//! - no `build.rs`, no `mod.rs`, and every Rust file starts with `//!`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The dependencies of one manifest, per section.
#[derive(Debug, Default)]
pub struct Manifest {
    pub name: String,
    /// `dependencies`, `dev-dependencies`, `build-dependencies` -> names.
    pub sections: BTreeMap<String, Vec<String>>,
}

/// Reads the package name and the dependency names of a Cargo.toml.
pub fn parse_manifest(text: &str) -> Manifest {
    let mut m = Manifest::default();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.trim_matches(['[', ']']).to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = key.trim();
        if section == "package" && key == "name" {
            m.name = value.trim().trim_matches('"').to_string();
        }
        let dep_section = section.rsplit('.').next().unwrap_or("");
        if matches!(dep_section, "dependencies" | "dev-dependencies" | "build-dependencies") {
            let dep = key.split('.').next().unwrap_or(key).trim().to_string();
            m.sections.entry(dep_section.to_string()).or_default().push(dep);
        }
    }
    m
}

/// Layer of each workspace crate; a crate may depend only on lower layers.
fn layer(name: &str) -> Option<u32> {
    Some(match name {
        "etwgpu-format" | "etwgpu-kernels" => 0,
        "etwgpu-graph" => 1,
        "etwgpu-runtime" => 2,
        "etwgpu-llm" => 3,
        "etwgpu-cli" | "etwgpu-web" | "etwgpu-python" => 4,
        "xtask" => 0,
        _ => return None,
    })
}

/// External crates that only some workspace crates may use:
/// (dependency, section, allowed crates).
const RESTRICTED: &[(&str, &str, &[&str])] = &[
    ("wgpu", "dependencies", &["etwgpu-runtime"]),
    ("wgpu", "dev-dependencies", &["etwgpu-runtime"]),
    ("flatbuffers", "dependencies", &["etwgpu-format"]),
    ("flatbuffers", "dev-dependencies", &["etwgpu-format"]),
    ("naga", "dependencies", &["xtask"]),
    ("naga", "dev-dependencies", &["etwgpu-kernels", "xtask"]),
    ("wasm-bindgen", "dependencies", &["etwgpu-web"]),
    ("wasm-bindgen-futures", "dependencies", &["etwgpu-web"]),
    ("js-sys", "dependencies", &["etwgpu-web"]),
    ("wasm-bindgen-test", "dev-dependencies", &["etwgpu-web"]),
    ("pyo3", "dependencies", &["etwgpu-python"]),
];

/// Checks the dependency rules over a set of manifests.
pub fn check_manifests(manifests: &[Manifest]) -> Vec<String> {
    let mut problems = Vec::new();
    for m in manifests {
        let Some(own) = layer(&m.name) else {
            problems.push(format!("{}: not a known workspace crate (add it to xtask's tidy layers)", m.name));
            continue;
        };
        for (section, deps) in &m.sections {
            for dep in deps {
                if let Some(dep_layer) = layer(dep)
                    && dep.starts_with("etwgpu-")
                {
                    let allowed = if m.name == "xtask" {
                        false
                    } else if dep == "etwgpu-kernels" || dep == "etwgpu-format" {
                        own > 0
                    } else {
                        dep_layer < own
                    };
                    if !allowed {
                        problems.push(format!("{}: depends on {dep} ({section}), which is not below it", m.name));
                    }
                }
                for (restricted, sec, allowed) in RESTRICTED {
                    if dep == restricted && section == sec && !allowed.contains(&m.name.as_str()) {
                        problems.push(format!("{}: uses {dep} in [{section}]; only {allowed:?} may", m.name));
                    }
                }
            }
            if section == "build-dependencies" && !deps.is_empty() {
                problems.push(format!("{}: has build-dependencies (no build scripts)", m.name));
            }
        }
    }
    problems
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The workspace dependencies `m` declares but never names in its Rust
/// sources under `dir` (see the module docs for where each section looks).
pub fn unused_dependencies(dir: &Path, m: &Manifest) -> Vec<String> {
    let text_of = |subdirs: &[&str]| {
        let mut files = Vec::new();
        for sub in subdirs {
            rust_files(&dir.join(sub), &mut files);
        }
        files.iter().filter_map(|f| fs::read_to_string(f).ok()).collect::<Vec<_>>().join("\n")
    };
    let mut problems = Vec::new();
    for (section, subdirs) in
        [("dependencies", &["src"][..]), ("dev-dependencies", &["src", "tests", "benches", "examples"][..])]
    {
        let deps: Vec<&String> =
            m.sections.get(section).into_iter().flatten().filter(|d| d.starts_with("etwgpu-")).collect();
        if deps.is_empty() {
            continue;
        }
        let text = text_of(subdirs);
        for dep in deps {
            if !text.contains(&dep.replace('-', "_")) {
                problems.push(format!("{}: declares {dep} in [{section}] but never uses it", m.name));
            }
        }
    }
    problems
}

/// Checks the whole repository; returns every problem found.
pub fn problems(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let mut manifests = Vec::new();
    let mut dirs: Vec<PathBuf> =
        fs::read_dir(root.join("crates")).map(|r| r.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    dirs.push(root.join("xtask"));
    dirs.sort();
    for dir in &dirs {
        match fs::read_to_string(dir.join("Cargo.toml")) {
            Ok(text) => {
                let m = parse_manifest(&text);
                problems.extend(unused_dependencies(dir, &m));
                manifests.push(m);
            }
            Err(e) => problems.push(format!("{}: {e}", dir.display())),
        }
        if dir.join("build.rs").exists() {
            problems.push(format!("{}: has a build.rs", dir.display()));
        }
    }
    problems.extend(check_manifests(&manifests));
    let mut files = Vec::new();
    for dir in &dirs {
        rust_files(dir, &mut files);
    }
    files.sort();
    for f in files {
        let rel = f.strip_prefix(root).unwrap_or(&f).display().to_string();
        if f.file_name().is_some_and(|n| n == "mod.rs") {
            problems.push(format!("{rel}: mod.rs files are not used; name the module file instead"));
        }
        match fs::read_to_string(&f) {
            Ok(text) if !text.starts_with("//!") => problems.push(format!("{rel}: does not start with a `//!` doc")),
            Ok(_) => {}
            Err(e) => problems.push(format!("{rel}: {e}")),
        }
    }
    problems
}

/// Fails when the repository breaks a tidy rule.
pub fn check(root: &Path) -> Result<(), String> {
    let p = problems(root);
    if p.is_empty() {
        eprintln!("tidy: ok");
        Ok(())
    } else {
        Err(format!("tidy found problems:\n  {}", p.join("\n  ")))
    }
}
