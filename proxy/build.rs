//! Names the commit built (`REGROUP_COMMIT`, for `regroup --version` and
//! `regroup_build_info`).

use std::process::Command;

fn main() {
    println!("cargo:rustc-env=REGROUP_COMMIT={}", commit());
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
