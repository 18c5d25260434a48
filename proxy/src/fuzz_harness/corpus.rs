//! Every fuzz corpus file (`fuzz/corpus/<target>/`, seeded from the
//! captures) and every kept crash (`fuzz/regressions/<target>/`) through the
//! same harness function the cargo-fuzz target calls: CI on stable, without
//! libFuzzer, still runs each input the fuzzer found interesting and each
//! input that once broke a decoder. See docs/fuzzing.md.

use std::path::{Path, PathBuf};

use super::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// Runs `f` on each file; a panic names the file before failing the test.
fn replay(target: &str, f: fn(&[u8]), inputs: &[PathBuf]) {
    for path in inputs {
        let data = std::fs::read(path).expect("readable corpus file");
        if std::panic::catch_unwind(|| f(&data)).is_err() {
            panic!("fuzz target {target} panicked on {}", path.display());
        }
    }
}

#[test]
fn every_target_has_a_seed_corpus_and_a_fuzz_target() {
    for (name, _) in TARGETS {
        let seeds = files(&fuzz_dir().join("corpus").join(name));
        assert!(
            !seeds.is_empty(),
            "fuzz/corpus/{name} is empty: run fuzz/seed.py"
        );
        let target = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let source = std::fs::read_to_string(&target)
            .unwrap_or_else(|e| panic!("{}: {e}", target.display()));
        assert!(
            source.contains(&format!("regroup::fuzz_harness::{name}(")),
            "{} does not call regroup::fuzz_harness::{name}",
            target.display()
        );
    }
}

#[test]
fn corpora_replay_without_panic() {
    let mut total = 0;
    for (name, f) in TARGETS {
        let inputs = files(&fuzz_dir().join("corpus").join(name));
        replay(name, *f, &inputs);
        total += inputs.len();
    }
    assert!(total > 0, "no corpus file replayed");
}

#[test]
fn kept_crashes_replay_without_panic() {
    for (name, f) in TARGETS {
        replay(name, *f, &files(&fuzz_dir().join("regressions").join(name)));
    }
}
