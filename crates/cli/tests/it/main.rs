//! End-to-end tests of the `etwgpu` binary: `inspect` on every exported
//! fixture (checked against what the exporter recorded, and snapshotted),
//! and one-line errors on bad input.
//!
//! The file is past 700 lines because `inspect`'s fixture checks and the
//! bad-input cases share its helpers; `serve` and the trusted-shaders flag
//! have files of their own.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod serve;
mod trusted;

pub(crate) fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures")
}

fn fixtures() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("test_data/fixtures exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.join("manifest.json").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 10, "expected the exported fixtures, found {}", dirs.len());
    dirs
}

pub(crate) fn etwgpu(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_etwgpu"));
    // Mesa warns on stderr when XDG_RUNTIME_DIR is unset; the one-line
    // error checks must see only etwgpu's own output.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    cmd.args(args).output().expect("the binary runs")
}

pub(crate) fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("utf-8 output")
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).expect("manifest")).expect("json")
}

/// `inspect --json` agrees with the exporter's own record of every fixture:
/// methods, their inputs and outputs, and per delegate the value and node
/// counts, op histogram and constants; plus the CPU kernel calls.
#[test]
fn inspect_json_matches_the_exporter() {
    for dir in fixtures() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let model = dir.join("model.pte");
        let got: Value = serde_json::from_str(&stdout(&etwgpu(&["inspect", "--json", model.to_str().unwrap()])))
            .expect("inspect --json prints JSON");
        let expected = &manifest(&dir)["expected"];
        let exp_methods = expected["methods"].as_array().expect("methods");
        let got_methods = got["methods"].as_array().expect("methods");
        assert_eq!(got_methods.len(), exp_methods.len(), "{name}: method count");
        for (g, e) in got_methods.iter().zip(exp_methods) {
            let ctx = format!("{name}/{}", e["name"]);
            assert_eq!(g["name"], e["name"], "{ctx}");
            for key in ["inputs", "outputs"] {
                let strip = |v: &Value| -> Vec<Value> {
                    v.as_array()
                        .expect("list")
                        .iter()
                        .map(|x| match x.get("dtype") {
                            Some(_) => serde_json::json!({"dtype": x["dtype"], "shape": x["shape"]}),
                            None => serde_json::json!({"kind": x["kind"]}),
                        })
                        .collect()
                };
                assert_eq!(strip(&g[key]), strip(&e[key]), "{ctx}: {key}");
            }
            let gd = g["delegates"].as_array().expect("delegates");
            let ed = e["delegates"].as_array().expect("delegates");
            assert_eq!(gd.len(), ed.len(), "{ctx}: delegate count");
            for (i, (gd, ed)) in gd.iter().zip(ed).enumerate() {
                for key in ["backend_id", "n_values", "n_nodes", "ops", "n_constants", "constant_bytes"] {
                    assert_eq!(gd[key], ed[key], "{ctx}: delegate {i} {key}");
                }
            }
            assert_eq!(g["kernel_calls"], e["kernel_calls"], "{ctx}: kernel calls");
        }
    }
}

#[test]
fn inspect_text_snapshots() {
    for dir in fixtures() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let model = dir.join("model.pte");
        let text = stdout(&etwgpu(&["inspect", model.to_str().unwrap()]));
        insta::assert_snapshot!(name, text);
    }
}

/// `run --profile --json --no-fuse` lists every op of the graph once, in
/// order, with its kernels, dispatches and time; the text table ends with
/// the totals. With fusion (the default) the profile lists the fused ops
/// and each call's dispatches without fusion, which are more.
#[test]
fn run_profile_lists_every_op() {
    if !gpu_available() {
        return;
    }
    for name in ["mlp", "transformer_block", "convnet"] {
        let model = fixtures_dir().join(name).join("model.pte");
        let model = model.to_str().unwrap();
        // The op histogram `inspect` prints ("      N  op" lines).
        let mut want = std::collections::BTreeMap::<String, usize>::new();
        for line in stdout(&etwgpu(&["inspect", model])).lines() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            if let [n, op] = parts[..]
                && line.starts_with("      ")
                && let Ok(n) = n.parse::<usize>()
            {
                *want.entry(op.to_string()).or_default() += n;
            }
        }
        let got: Value = serde_json::from_str(&stdout(&etwgpu(&[
            "run",
            model,
            "--random-inputs",
            "--profile",
            "--json",
            "--no-fuse",
        ])))
        .expect("run --profile --json prints JSON");
        assert_eq!(got["calls"][0]["fusion"], false);
        let nodes = got["calls"][0]["nodes"].as_array().expect("nodes");
        let mut seen = std::collections::BTreeMap::<String, usize>::new();
        for n in nodes {
            *seen.entry(n["op"].as_str().expect("op").to_string()).or_default() += 1;
            assert!(n["ns"].as_f64().expect("ns") >= 0.0);
            let dispatches = n["dispatches"].as_u64().expect("dispatches");
            assert_eq!(n["kernels"].as_array().expect("kernels").is_empty(), dispatches == 0, "{name}: {n}");
        }
        assert_eq!(seen, want, "{name}: the profile lists every op");
        let total: u64 = nodes.iter().map(|n| n["dispatches"].as_u64().unwrap()).sum();
        assert!(total > 0);
        assert_eq!(got["calls"][0]["total_dispatches"].as_u64(), Some(total));
        let text = stdout(&etwgpu(&["run", model, "--random-inputs", "--profile", "--no-fuse"]));
        assert!(text.contains(&format!("total: {} op(s), {total} dispatch(es)", nodes.len())), "{text}");

        let fused: Value =
            serde_json::from_str(&stdout(&etwgpu(&["run", model, "--random-inputs", "--profile", "--json"])))
                .expect("run --profile --json prints JSON");
        let call = &fused["calls"][0];
        assert_eq!(call["fusion"], true);
        assert_eq!(call["dispatches_without_fusion"].as_u64(), Some(total), "{name}");
        let fused_total = call["total_dispatches"].as_u64().expect("total");
        let fused_ops =
            call["nodes"].as_array().expect("nodes").iter().any(|n| n["op"].as_str().unwrap().starts_with("etwgpu."));
        // convnet's conv already has its clamp; nothing there fuses.
        let fuses = name != "convnet";
        assert_eq!(fused_ops, fuses, "{name}: fused ops in the profile");
        assert_eq!(fused_total < total, fuses, "{name}: {fused_total} dispatches fused, {total} not");
        let text = stdout(&etwgpu(&["run", model, "--random-inputs", "--profile"]));
        assert!(
            text.contains(&format!("dispatches: {fused_total} with fusion, {total} without (--no-fuse)")),
            "{text}"
        );
    }
}

/// `run --profile --profile-by kernel` times each shader's dispatches in a
/// pass of their own and the whole call in one pass: the JSON says how it
/// was timed and gives the whole call's time, every GPU op gets a time,
/// and the text header names the mode.
#[test]
fn run_profile_by_kernel() {
    if !gpu_available() {
        return;
    }
    let model = fixtures_dir().join("transformer_block").join("model.pte");
    let model = model.to_str().unwrap();
    let args = ["run", model, "--random-inputs", "--profile", "--profile-by", "kernel"];
    let got: Value = serde_json::from_str(&stdout(&etwgpu(&[&args[..], &["--json"]].concat()))).expect("prints JSON");
    let call = &got["calls"][0];
    assert_eq!(call["profile_by"], "kernel");
    let nodes = call["nodes"].as_array().expect("nodes");
    let timed = nodes.iter().filter(|n| n["dispatches"].as_u64() > Some(0));
    assert!(timed.clone().count() > 0 && timed.clone().all(|n| n["ns"].as_f64() > Some(0.0)), "{call}");
    if nodes.iter().any(|n| n["gpu_timestamps"] == true) {
        assert!(call["whole_call_ns"].as_f64() > Some(0.0), "{call}");
    }
    let text = stdout(&etwgpu(&args));
    assert!(text.contains("profile (GPU timestamps, by kernel") || text.contains("wall time per dispatch"), "{text}");
    let plain: Value =
        serde_json::from_str(&stdout(&etwgpu(&["run", model, "--random-inputs", "--profile", "--json"])))
            .expect("prints JSON");
    assert_eq!(plain["calls"][0]["profile_by"], "dispatch");
    assert!(plain["calls"][0]["whole_call_ns"].is_null());
}

/// `inspect --plan` lowers every delegate without a GPU and plans its
/// memory; the plans are snapshotted and stay within 1.15x of the lower
/// bound.
#[test]
fn inspect_plan_snapshots() {
    for dir in fixtures() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let model = dir.join("model.pte");
        let text = stdout(&etwgpu(&["inspect", "--plan", model.to_str().unwrap()]));
        assert!(!text.contains("cannot"), "{name}: a delegate was not planned:\n{text}");
        for line in text.lines().filter_map(|l| l.trim().strip_prefix("planned / lower bound: ")) {
            let ratio: f64 = line.split(',').next().unwrap().parse().expect("a ratio");
            assert!(ratio <= 1.15, "{name}: planned / lower bound {ratio} > 1.15");
        }
        insta::assert_snapshot!(format!("plan_{name}"), text);
    }
}

fn one_line_error(o: &Output, status: i32) -> String {
    assert_eq!(o.status.code(), Some(status), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "nothing on stdout");
    let err = String::from_utf8(o.stderr.clone()).expect("utf-8");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn bad_files_fail_with_one_line() {
    let tmp = std::env::temp_dir().join(format!("etwgpu-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("tmp dir");
    let good = std::fs::read(fixtures_dir().join("mlp/model.pte")).expect("fixture");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.pte", vec![], "needs 8 bytes but only 0 are there"),
        ("truncated.pte", good[..good.len() / 2].to_vec(), "are there"),
        ("text.pte", b"this is not a program at all".to_vec(), "expected identifier \"ET12\""),
    ];
    for (file, bytes, needle) in cases {
        let path = tmp.join(file);
        std::fs::write(&path, bytes).expect("write");
        let err = one_line_error(&etwgpu(&["inspect", path.to_str().unwrap()]), 1);
        assert!(err.starts_with("error: ") && err.contains(needle), "{file}: {err}");
    }
    let err = one_line_error(&etwgpu(&["inspect", "/nonexistent/model.pte"]), 1);
    assert!(err.contains("cannot read /nonexistent/model.pte"), "{err}");
    std::fs::remove_dir_all(&tmp).expect("cleanup");
}

#[test]
fn usage_errors_exit_2() {
    let o = etwgpu(&[]);
    assert_eq!(o.status.code(), Some(2));
    let o = etwgpu(&["inspect", "--frobnicate", "x.pte"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: unexpected argument '--frobnicate'"), "{err}");
    let o = etwgpu(&["run", "x.pte", "--repeat", "0"]);
    assert_eq!(o.status.code(), Some(2), "--repeat 0 is a usage error");
    let o = etwgpu(&["run", "x.pte"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give inputs with --call or --input"));
    let o = etwgpu(&["inspect", "--no-fuse", "x.pte"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--no-fuse needs --plan"));
    let o = etwgpu(&["run", "x.pte", "--random-inputs", "--profile", "--profile-by", "op"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("takes dispatch or kernel"));
    let o = etwgpu(&["run", "x.pte", "--random-inputs", "--profile-by", "kernel"]);
    assert_eq!(o.status.code(), Some(2), "--profile-by needs --profile");
}

/// `--precision f32|mixed|f16` on every command that loads a program: in
/// its `--help`, an unknown value a usage error naming the accepted ones,
/// and an unknown `ETWGPU_PRECISION` a one-line error naming them too.
#[test]
fn precision_flag_and_env() {
    for cmd in ["run", "generate", "chat", "bench", "serve"] {
        let help = stdout(&etwgpu(&[cmd, "--help"]));
        assert!(help.contains("--precision <f32|mixed|f16>") && help.contains("ETWGPU_PRECISION"), "{cmd}: {help}");
    }
    let usage = [
        vec!["run", "x.pte", "--random-inputs", "--precision", "half"],
        vec!["generate", "--model", "x.pte", "--tokens", "1", "--precision", "half"],
        vec!["bench", "x.pte", "--precision", "half"],
    ];
    for args in usage {
        let o = etwgpu(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("takes f32, mixed or f16, not \"half\""), "{args:?}: {err}");
    }
    let model = fixtures_dir().join("worked_example/model.pte");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_etwgpu"));
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let o = cmd
        .env("ETWGPU_PRECISION", "half")
        .args(["run", model.to_str().unwrap(), "--random-inputs"])
        .output()
        .expect("the binary runs");
    let err = one_line_error(&o, 1);
    assert!(err.contains("ETWGPU_PRECISION=\"half\"") && err.contains("f32, mixed or f16"), "{err}");
    if !gpu_available() {
        return;
    }
    // The profile names the precision a load took; without matrix units
    // (lavapipe) the route is the tiled one at every setting.
    for p in ["f32", "mixed", "f16"] {
        let o = etwgpu(&["run", model.to_str().unwrap(), "--random-inputs", "--profile", "--precision", p]);
        let report = stdout(&o);
        assert!(report.contains(&format!("(precision {p})")), "{p}: {report}");
    }
}

/// `--help` on every command shows its flags and examples; `--version`
/// names the revision; `completions` writes a script for each shell.
#[test]
fn help_version_and_completions() {
    for cmd in ["inspect", "run", "generate", "chat", "bench", "serve", "devices", "completions"] {
        let out = stdout(&etwgpu(&[cmd, "--help"]));
        assert!(out.contains("Usage: etwgpu ") && out.contains("Examples:"), "{cmd} --help: {out}");
    }
    let out = stdout(&etwgpu(&["--help"]));
    for cmd in ["inspect", "run", "generate", "chat", "bench", "serve", "devices", "completions"] {
        assert!(out.contains(cmd), "--help lists {cmd}: {out}");
    }
    let v = stdout(&etwgpu(&["--version"]));
    assert!(v.starts_with(concat!("etwgpu ", env!("CARGO_PKG_VERSION"), " (")), "{v}");
    for (shell, needle) in [("bash", "complete -F"), ("zsh", "#compdef etwgpu"), ("fish", "complete -c etwgpu")] {
        let script = stdout(&etwgpu(&["completions", shell]));
        assert!(script.contains(needle) && script.contains("serve"), "{shell}: {script}");
    }
    let o = etwgpu(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `bench` on the tiny Llama: the llama-bench grid as a table, CSV and
/// JSON; on another program, latency percentiles. Both name the adapter.
#[test]
fn bench_tables() {
    if !gpu_available() {
        return;
    }
    let llama = fixtures_dir().join("llama_tiny_fp32/model.pte");
    let l = llama.to_str().unwrap();
    let md =
        stdout(&etwgpu(&["bench", l, "-p", "4,8", "-n", "4", "-d", "0,8", "--repeats", "2", "--bandwidth-mib", "4"]));
    let lines: Vec<&str> = md.lines().collect();
    assert!(lines[0].starts_with("adapter: ") && lines[0].contains("copy bandwidth"), "{md}");
    let rows: Vec<&str> = lines.iter().filter(|l| l.starts_with("| model.pte")).copied().collect();
    let tests: Vec<&str> = rows.iter().map(|r| r.split('|').nth(3).unwrap().trim()).collect();
    assert_eq!(tests, ["pp4", "pp8", "tg4", "pp4 @ d8", "pp8 @ d8", "tg4 @ d8"], "{md}");
    assert!(rows.iter().all(|r| r.contains(" ± ") && r.trim_end().ends_with("| 2 |")), "{md}");
    let csv = stdout(&etwgpu(&["bench", l, "-p", "4", "-n", "2", "-r", "1", "-o", "csv", "--bandwidth-mib", "0"]));
    let csv: Vec<&str> = csv.lines().collect();
    assert_eq!(csv.len(), 3, "{csv:?}");
    assert!(csv[0].starts_with("model,adapter,") && csv[1].contains(",pp4,4,0,0,1,"), "{csv:?}");
    let json: Value = serde_json::from_str(&stdout(&etwgpu(&[
        "bench",
        l,
        "-p",
        "4",
        "-n",
        "2",
        "-r",
        "3",
        "-o",
        "json",
        "--bandwidth-mib",
        "4",
    ])))
    .expect("json");
    let r = &json["results"][1];
    assert_eq!((r["test"].as_str(), r["repeats"].as_u64()), (Some("tg2"), Some(3)), "{json}");
    assert!(r["median_tps"].as_f64().is_some_and(|t| t > 0.0) && r["samples_tps"].as_array().unwrap().len() == 3);
    assert!(json["device"]["copy_gb_per_s"].as_f64().is_some_and(|b| b > 0.0), "{json}");
    let o = etwgpu(&["bench", l, "-p", "30", "-n", "4", "-d", "8"]);
    assert!(one_line_error(&o, 1).contains("pp30 (-p 30) at depth 8 needs 38 tokens of context; model.pte holds 32"));
    let o = etwgpu(&["bench", l, "-p", "4", "-n", "24", "-d", "0,8"]);
    assert!(one_line_error(&o, 1).contains("tg24 (-n 24) at depth 8 needs 33 tokens"));

    let mlp = fixtures_dir().join("mlp/model.pte");
    let md = stdout(&etwgpu(&["bench", mlp.to_str().unwrap(), "--repeats", "5", "--bandwidth-mib", "0"]));
    assert!(
        md.contains("| p50 ms | p90 ms | p99 ms |") && md.contains("| model.pte | forward | random inputs | 5 |"),
        "{md}"
    );
}

/// `inspect --plan --no-fuse` plans the chains as exported: the counts
/// before fusion, no fused line, and the memory plan `--plan` prints for
/// the fused chain is the larger one.
#[test]
fn inspect_plan_without_fusion() {
    let model = fixtures_dir().join("llama_tiny_q4").join("model.pte");
    let model = model.to_str().unwrap();
    let plain = stdout(&etwgpu(&["inspect", "--plan", "--no-fuse", model]));
    let fused = stdout(&etwgpu(&["inspect", "--plan", model]));
    assert!(plain.contains("not fused (--no-fuse)") && !plain.contains("    fused ("), "{plain}");
    assert!(fused.contains("    fused (2 swiglu, 2 qkv"), "{fused}");
    let planned = |text: &str| -> u64 {
        let line = text.lines().find_map(|l| l.trim().strip_prefix("planned:")).expect("a planned line");
        line.split_whitespace().next().unwrap().parse().expect("bytes")
    };
    assert!(planned(&fused) < planned(&plain), "fusion plans less memory:\n{fused}\n{plain}");
}

/// Whether GPU tests can run here; panics when `GPU_TESTS=require` and no
/// adapter is found, so CI cannot pass without a GPU.
pub(crate) fn gpu_available() -> bool {
    match etwgpu_runtime::Runtime::new() {
        Ok(_) => true,
        Err(e) if std::env::var("GPU_TESTS").as_deref() == Ok("require") => {
            panic!("GPU_TESTS=require but no GPU runtime: {e}")
        }
        Err(e) => {
            eprintln!("skipping GPU test: {e} (set GPU_TESTS=require to fail instead)");
            false
        }
    }
}

#[test]
fn run_writes_outputs_matching_the_golden() {
    if !gpu_available() {
        return;
    }
    let dir = fixtures_dir().join("worked_example");
    let out = std::env::temp_dir().join(format!("etwgpu-cli-run-{}", std::process::id()));
    let call = format!("{},{}", dir.join("call0.in0.npy").display(), dir.join("call0.in1.npy").display());
    let o = etwgpu(&[
        "run",
        dir.join("model.pte").to_str().unwrap(),
        "--call",
        &call,
        "--output-dir",
        out.to_str().unwrap(),
        "--repeat",
        "3",
    ]);
    let report = stdout(&o);
    assert!(report.contains("call 0: 2 input(s) -> float32[2, 3] (median"), "{report}");
    let got = etwgpu_runtime::Tensor::read_npy(out.join("call0.out0.npy")).expect("output written");
    let want = etwgpu_runtime::Tensor::read_npy(dir.join("call0.out0.npy")).expect("golden");
    assert_eq!(got.shape, want.shape);
    for (g, w) in got.to_f64_vec().iter().zip(want.to_f64_vec()) {
        // The fixture's float32 tolerance (manifest): rtol 1e-4, atol 1e-4.
        assert!((g - w).abs() <= 1e-4 + 1e-4 * w.abs(), "{g} vs {w}");
    }
    std::fs::remove_dir_all(&out).expect("cleanup");
}

#[test]
fn run_reports_bad_inputs_in_one_line() {
    if !gpu_available() {
        return;
    }
    let dir = fixtures_dir().join("worked_example");
    let model = dir.join("model.pte");
    let one = dir.join("call0.in0.npy");
    let err = one_line_error(&etwgpu(&["run", model.to_str().unwrap(), "--input", one.to_str().unwrap()]), 1);
    assert!(err.contains("call 0") && err.contains('2') && err.contains('1'), "{err}");
    let err = one_line_error(&etwgpu(&["run", model.to_str().unwrap(), "--input", "/nonexistent.npy"]), 1);
    assert!(err.contains("/nonexistent.npy"), "{err}");
    let o = etwgpu(&["run", model.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: give inputs with --call or --input"));
}

#[test]
fn devices_lists_the_adapter_runtime_picks() {
    if !gpu_available() {
        return;
    }
    let list: Value = serde_json::from_str(&stdout(&etwgpu(&["devices", "--json"]))).expect("JSON");
    let list = list.as_array().expect("a list");
    let picked = etwgpu_runtime::Runtime::new().expect("runtime").adapter_info().name.clone();
    let defaults: Vec<&Value> = list.iter().filter(|a| a["default"] == true).collect();
    assert_eq!(defaults.len(), 1, "{list:?}");
    assert_eq!(defaults[0]["name"], picked.as_str());
    assert!(defaults[0]["max_storage_binding_bytes"].as_u64().expect("a number") >= 128 << 20);
    let text = stdout(&etwgpu(&["devices"]));
    assert!(text.contains(&picked) && text.contains("[default]"), "{text}");
    // --bandwidth adds one JSON line: the copy bandwidth of that adapter.
    let text = stdout(&etwgpu(&["devices", "--json", "--bandwidth"]));
    let b: Value = serde_json::from_str(text.lines().nth(1).expect("a second line")).expect("JSON");
    assert_eq!(b["adapter"], picked.as_str());
    let (bytes, seconds, gbps) =
        (b["copy_bytes"].as_f64().unwrap(), b["seconds"].as_f64().unwrap(), b["gb_per_s"].as_f64().unwrap());
    assert!(bytes >= (64 << 20) as f64 && seconds > 0.0, "{b}");
    assert!((gbps - 2.0 * bytes / seconds / 1e9).abs() <= 1e-6 * gbps, "read+write bytes per second: {b}");
}

/// Every file of the hostile corpus: `inspect` either prints its report or
/// exits 1 with one line naming the problem; never a panic or a crash.
#[test]
fn inspect_survives_the_hostile_corpus() {
    let dir = fixtures_dir().join("../hostile");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("test_data/hostile") {
        let path = entry.expect("entry").path();
        let o = etwgpu(&["inspect", path.to_str().unwrap()]);
        match o.status.code() {
            Some(0) => assert!(!o.stdout.is_empty(), "{}: no report", path.display()),
            Some(1) => {
                let err = one_line_error(&o, 1);
                assert!(err.starts_with("error: "), "{}: {err}", path.display());
            }
            other => panic!("{}: exit {other:?}: {}", path.display(), String::from_utf8_lossy(&o.stderr)),
        }
        n += 1;
    }
    assert!(n >= 30, "only {n} hostile files");
}

/// Hostile files whose problem only a load sees: `run` names it in one line.
#[test]
fn run_names_load_time_problems_of_hostile_files() {
    if !gpu_available() {
        return;
    }
    let dir = fixtures_dir().join("../hostile");
    for (file, needle) in [
        ("op_unknown.pte", "unsupported operator aten.frobnicate.default"),
        ("op_arg_wrong_kind.pte", "argument 1 (weight): expected Tensor, found Int"),
        ("constant_key_missing.pte", "was not found; pass its .ptd"),
    ] {
        let path = dir.join(file);
        let err = one_line_error(&etwgpu(&["run", path.to_str().unwrap(), "--random-inputs"]), 1);
        assert!(err.contains(needle), "{file}: {err}");
    }
}

/// `generate --tokens` on the tiny Llama: greedy ids equal the eager argmax
/// tokens the fixture recorded (calls 1..3 feed them), then the counts.
#[test]
fn generate_tokens_matches_the_eager_argmax() {
    if !gpu_available() {
        return;
    }
    let dir = fixtures_dir().join("llama_tiny_fp32");
    let ids = |file: &str| -> Vec<String> {
        let t = etwgpu_runtime::Tensor::read_npy(dir.join(file)).expect("fixture tokens");
        t.to_f64_vec().iter().map(|&v| (v as u32).to_string()).collect()
    };
    let prompt = ids("call0.in0.npy");
    let expected: Vec<String> = (1..=3).flat_map(|i| ids(&format!("call{i}.in0.npy"))).collect();
    let model = dir.join("model.pte");
    let args = ["generate", "--model", model.to_str().unwrap(), "--tokens", &prompt.join(","), "--max-tokens", "3"];
    let out = stdout(&etwgpu(&args));
    let mut lines = out.lines();
    assert_eq!(lines.next().expect("token line").split_whitespace().collect::<Vec<_>>(), expected, "{out}");
    let stats = lines.next().expect("stats line");
    assert!(stats.starts_with(&format!("prompt: {} tokens (", prompt.len())), "{stats}");
    assert!(stats.contains("generated: 3 tokens (decode ") && stats.ends_with(" tokens/s)"), "{stats}");

    let args = ["generate", "--model", model.to_str().unwrap(), "--tokens", &prompt.join(","), "--max-tokens", "40"];
    let err = one_line_error(&etwgpu(&args), 1);
    assert!(
        err.contains(&format!("prompt of {} tokens + 40 new tokens exceeds the context of 32", prompt.len())),
        "{err}"
    );
    let o = etwgpu(&["generate", "--model", model.to_str().unwrap(), "--prompt", "hi"]);
    assert_eq!(o.status.code(), Some(2), "--prompt without --tokenizer is a usage error");

    // The float32 cache (as exported) gives the same greedy tokens here.
    let joined = prompt.join(",");
    let args = [&args[..4], &[joined.as_str(), "--max-tokens", "3", "--kv-cache", "f32"]].concat();
    let out = stdout(&etwgpu(&args));
    assert_eq!(out.lines().next().expect("token line").split_whitespace().collect::<Vec<_>>(), expected, "{out}");
    let o = etwgpu(&["generate", "--model", model.to_str().unwrap(), "--tokens", "1", "--kv-cache", "f8"]);
    assert_eq!(o.status.code(), Some(2), "--kv-cache f8 is a usage error");
}

/// A HuggingFace `tokenizer.json` (byte-level, no merges) for the tiny
/// Llama's vocab of 128: id `b` is byte `b` in GPT-2's byte-to-character
/// map; with `chatml`, ids 1 and 2 are instead the special tokens
/// `<|im_start|>` and `<|im_end|>` (control bytes no prompt here uses).
pub(crate) fn byte_tokenizer(chatml: bool) -> Value {
    let mut n = 0;
    let mut vocab = serde_json::Map::new();
    let mut added = Vec::new();
    for b in 0..128u32 {
        let c = if (33..=126).contains(&b) {
            char::from_u32(b).unwrap()
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap()
        };
        let special = [(1, "<|im_start|>"), (2, "<|im_end|>")].into_iter().find(|&(id, _)| chatml && id == b);
        let token = special.map_or_else(|| c.to_string(), |(_, t)| t.to_string());
        if special.is_some() {
            added.push(serde_json::json!({"id": b, "content": token, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true}));
        }
        vocab.insert(token, b.into());
    }
    let byte_level = serde_json::json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
        "use_regex": true});
    serde_json::json!({"version": "1.0", "added_tokens": added, "pre_tokenizer": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "vocab": vocab, "merges": []}})
}

/// `chat` on the tiny Llama (context 32) with the byte tokenizer plus
/// ChatML tokens: each stdin line is a turn; a turn that no longer fits
/// drops the earlier ones; `/reset` starts over, so the same first message
/// gets the same (greedy) reply.
#[test]
fn chat_turns_context_and_reset() {
    if !gpu_available() {
        return;
    }
    let json = byte_tokenizer(true);
    let tmp = std::env::temp_dir().join(format!("etwgpu-cli-chat-{}.json", std::process::id()));
    std::fs::write(&tmp, json.to_string()).expect("write tokenizer");
    let model = fixtures_dir().join("llama_tiny_fp32/model.pte");
    let mut child = Command::new(env!("CARGO_BIN_EXE_etwgpu"))
        .args(["chat", "--model", model.to_str().unwrap(), "--tokenizer", tmp.to_str().unwrap(), "--max-tokens", "4"])
        .env("XDG_RUNTIME_DIR", std::env::var_os("XDG_RUNTIME_DIR").unwrap_or_else(|| std::env::temp_dir().into()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    use std::io::Write as _;
    child.stdin.take().expect("stdin").write_all(b"Hi\nYo\n/reset\nHi\n/quit\nnever read\n").expect("write stdin");
    let o = child.wait_with_output().expect("chat ends");
    std::fs::remove_file(&tmp).expect("cleanup");
    let out = stdout(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    let replies: Vec<&str> = out.lines().collect();
    assert_eq!(replies.len(), 3, "one reply line per turn: {out:?} / {err}");
    assert_eq!(replies[0], replies[2], "same first turn after /reset");
    let notes: Vec<&str> = err.lines().collect();
    assert_eq!(notes.len(), 5, "{err}");
    assert!(notes[0].starts_with("[21 prompt tokens") && notes[0].ends_with("27 of 32 context tokens used]"), "{err}");
    assert_eq!(notes[1], "[context full: dropped 1 earlier turn(s)]");
    assert_eq!(notes[3], "[reset]");
    assert!(notes[4].starts_with("[21 prompt tokens"), "{err}");
}

/// `generate --prompt --tokenizer` end to end on the tiny Llama (vocab 128)
/// with a byte-level tokenizer whose id `b` is byte `b` (no merges), so the
/// prompt's ASCII bytes are the token ids and every output id decodes to one
/// ASCII character.
#[test]
fn generate_prompt_with_a_byte_tokenizer() {
    if !gpu_available() {
        return;
    }
    let json = byte_tokenizer(false);
    let tmp = std::env::temp_dir().join(format!("etwgpu-cli-tokenizer-{}.json", std::process::id()));
    std::fs::write(&tmp, json.to_string()).expect("write tokenizer");
    let model = fixtures_dir().join("llama_tiny_fp32/model.pte");
    let (m, t) = (model.to_str().unwrap(), tmp.to_str().unwrap());
    let text = |extra: &[&str]| {
        let mut args = vec!["generate", "--model", m, "--tokenizer", t, "--prompt", "Hi there", "--max-tokens", "8"];
        args.extend_from_slice(extra);
        stdout(&etwgpu(&args))
    };
    let greedy = text(&[]);
    let (generated, stats) = greedy.split_once("\nprompt: ").expect("a stats line");
    assert_eq!(generated.chars().count(), 8, "{greedy:?}");
    assert!(stats.starts_with("8 tokens (") && stats.contains("generated: 8 tokens"), "{stats}");
    // Same seed, same text; greedy is repeatable.
    assert_eq!(text(&[]).split_once('\n').unwrap().0, generated);
    let sampled = ["--temperature", "0.9", "--top-k", "50", "--top-p", "0.9", "--seed", "5"];
    assert_eq!(text(&sampled).split_once("\nprompt").unwrap().0, text(&sampled).split_once("\nprompt").unwrap().0);

    // ChatML: ids 1 and 2 become <|im_start|> and <|im_end|>; the prompt
    // is "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n".
    let json = byte_tokenizer(true);
    std::fs::write(&tmp, json.to_string()).expect("write tokenizer");
    let args = ["generate", "--model", m, "--tokenizer", t, "--prompt", "Hi", "--chat", "--max-tokens", "8"];
    let out = stdout(&etwgpu(&args));
    let (generated, stats) = out.split_once("\nprompt: ").expect("a stats line");
    assert!(stats.starts_with("21 tokens ("), "{stats}");
    assert!(!generated.contains("<|im_end|>"), "the stop token is not printed: {generated:?}");
    std::fs::remove_file(&tmp).expect("cleanup");
}

/// Out of memory at load is an error, not an abort: `run` on a model whose
/// buffers (about 6 GiB) cannot fit in a 3 GiB address space (`ulimit -v`,
/// so the driver's allocations really fail) exits 1 with one line naming
/// the method and the bytes it asked for.
#[test]
fn out_of_memory_at_load_is_one_line() {
    use etwgpu_format::DType;
    use etwgpu_format::writer::{GraphBuilder, ProgramBuilder};
    if !gpu_available() {
        return;
    }
    // Twenty 64 MiB outputs (plus their read-back buffers), each computed
    // from one 64 MiB input.
    let n = 16 << 20;
    let mut g = GraphBuilder::new();
    let x = g.tensor(DType::F32, &[n]);
    let outs: Vec<_> = (0..20).map(|_| g.tensor(DType::F32, &[n])).collect();
    for &out in &outs {
        g.op("aten.relu.default", &[x, out]);
    }
    g.inputs(&[x]).outputs(&outs);
    let dir = std::env::temp_dir().join(format!("etwgpu-cli-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let model = dir.join("big.pte");
    std::fs::write(&model, ProgramBuilder::single_delegate(g).to_bytes()).expect("write");
    let script =
        format!("ulimit -v 3000000 && exec {} run {} --random-inputs", env!("CARGO_BIN_EXE_etwgpu"), model.display());
    let mut cmd = Command::new("sh");
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        cmd.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    let o = cmd.args(["-c", &script]).output().expect("sh runs");
    std::fs::remove_dir_all(&dir).expect("cleanup");
    let err = one_line_error(&o, 1);
    assert!(err.contains("ran out of memory") && err.contains("\"forward\""), "{err}");
}
