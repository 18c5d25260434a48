//! Compiles regroup's Kubernetes `.proto` subset (`proto/`) with protox (no
//! protoc needed) into a FileDescriptorSet that `src/rewrite/protobuf`
//! embeds with `include_bytes!`; and names the commit built
//! (`REGROUP_COMMIT`, for `regroup --version` and `regroup_build_info`).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rustc-env=REGROUP_COMMIT={}", commit());
    let dir = PathBuf::from("proto");
    println!("cargo:rerun-if-changed=proto");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("proto/ is readable")
        .map(|e| e.expect("proto/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "proto"))
        .collect();
    files.sort();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let mut compiler = protox::Compiler::new([&dir]).expect("protox compiler");
    compiler.include_imports(true).include_source_info(false);
    for f in &files {
        let name = f.strip_prefix(&dir).expect("under proto/");
        if let Err(e) = compiler.open_file(name) {
            panic!("{}: {e}", f.display());
        }
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("k8s_descriptors.bin");
    std::fs::write(&out, compiler.encode_file_descriptor_set()).expect("write descriptors");
}

/// The commit built: `$REGROUP_COMMIT` when set (the image build has no
/// `.git`: `docker build --build-arg REGROUP_COMMIT=$(git rev-parse HEAD)`),
/// else `git rev-parse HEAD` in a checkout, else `unknown`. Never fails the
/// build.
fn commit() -> String {
    println!("cargo:rerun-if-env-changed=REGROUP_COMMIT");
    if let Ok(c) = std::env::var("REGROUP_COMMIT") {
        let c = c.trim();
        if !c.is_empty()
            && c.len() <= 64
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        {
            return c.to_owned();
        }
    }
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
    };
    let Some(head) = git(&["rev-parse", "HEAD"]) else {
        return "unknown".into();
    };
    // Built again when HEAD moves: HEAD itself, the branch it names, and
    // packed refs (only files that exist: a missing one would rerun the
    // script on every build).
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for p in watched.into_iter().flatten() {
        if std::path::Path::new(&p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    head.chars().take(12).collect()
}
