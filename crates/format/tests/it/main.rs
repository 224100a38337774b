//! The reader on the real exported fixtures: every fixture parses with all
//! constants resolved, and truncated or mutated copies give errors, never
//! panics.

use std::path::{Path, PathBuf};

mod hostile;

use etwgpu_format::{ConstantSource, Program};

fn fixture_models() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test_data/fixtures");
    let mut models: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("test_data/fixtures exists")
        .map(|e| e.expect("entry").path().join("model.pte"))
        .filter(|p| p.exists())
        .collect();
    models.sort();
    assert!(models.len() >= 10, "expected the exported fixtures, found {}", models.len());
    models
}

#[test]
fn every_fixture_parses_with_constants_resolved() {
    for path in fixture_models() {
        let program = Program::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut n_graphs = 0;
        for m in &program.methods {
            for (_, _, g) in m.vulkan_delegates() {
                n_graphs += 1;
                for (i, c) in g.constants.iter().enumerate() {
                    let data = match &c.source {
                        ConstantSource::Missing { key } => panic!("{}: constant {i} key {key} missing", path.display()),
                        ConstantSource::Named { data, .. } | ConstantSource::DelegateBytes(data) => data,
                    };
                    assert_eq!(program.data(data).len() as u64, c.len, "{}: constant {i}", path.display());
                }
                for v in &g.values {
                    if let Some(t) = v.as_tensor() {
                        assert!(t.dims.len() <= 8, "{}: rank {}", path.display(), t.dims.len());
                    }
                }
            }
        }
        assert!(n_graphs >= 1, "{}: no Vulkan delegate", path.display());
    }
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn truncated_fixtures_are_errors() {
    for path in fixture_models() {
        let bytes = std::fs::read(&path).expect("read");
        // Every offset in the headers, then 300 spread over the file.
        let step = (bytes.len() / 300).max(1);
        let cuts = (0..bytes.len().min(256)).chain((256..bytes.len()).step_by(step));
        for len in cuts {
            assert!(
                Program::from_bytes(bytes[..len].to_vec()).is_err(),
                "{} truncated to {len} bytes parsed",
                path.display()
            );
        }
    }
}

#[test]
fn mutated_fixtures_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for path in fixture_models() {
        let bytes = std::fs::read(&path).expect("read");
        let program_size = Program::from_bytes(bytes.clone())
            .expect("parses")
            .header
            .map_or(bytes.len(), |h| usize::try_from(h.program_size).expect("fits"));
        for _ in 0..300 {
            let mut b = bytes.clone();
            // Mostly hit the FlatBuffers (where the structure is), sometimes anywhere.
            let span = if rng.next().is_multiple_of(4) { b.len() } else { program_size };
            for _ in 0..1 + rng.next() % 6 {
                let at = (rng.next() as usize) % span;
                b[at] = rng.next() as u8;
            }
            let _ = Program::from_bytes(b);
        }
    }
}

/// Inputs that once made the reader panic (found by `cargo fuzz`); each must
/// now give an error or a program.
#[test]
fn fuzz_regressions_do_not_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("regressions dir") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("read");
        let _ = Program::from_bytes(bytes);
        n += 1;
    }
    assert!(n >= 1);
}
