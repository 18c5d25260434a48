//! The command line as people type it: `render -f` as kubectl's
//! (files, directories, repeatable, `-`), errors naming the file and its
//! own line, `serve --listen :PORT`, `--metrics localhost:PORT`,
//! `--log-level`, `--log-format`, and what a bad address is told. Config
//! files take `:PORT` too (`regroup_config::addr`'s tests), and Go's
//! durations (`regroup_config::limits`' tests).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FOO: &str = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n";

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("regroup-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(p: &Path, text: &str) {
    std::fs::write(p, text).unwrap();
}

fn config(dir: &Path) -> PathBuf {
    let c = dir.join("config.yaml");
    write(
        &c,
        "rules:\n- from: samplecontroller.k8s.io\n  to: samplecontroller.team1.example.com\n",
    );
    c
}

fn regroup(args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_regroup"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let _ = pipe.write_all(stdin.as_bytes());
    drop(pipe);
    child.wait_with_output().unwrap()
}

#[test]
fn render_takes_directories_files_and_stdin_repeatedly_in_order() {
    let d = tmp("render");
    let cfg = config(&d);
    std::fs::create_dir(d.join("dir")).unwrap();
    write(
        &d.join("dir/a.yaml"),
        &format!("{FOO}metadata: {{name: a}}\n"),
    );
    write(
        &d.join("dir/b.json"),
        r#"{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "b"}}"#,
    );
    write(&d.join("dir/notes.txt"), "not a manifest");
    write(&d.join("c.yaml"), &format!("{FOO}metadata: {{name: c}}\n"));
    let out = regroup(
        &[
            "render",
            "-c",
            cfg.to_str().unwrap(),
            "-f",
            d.join("dir").to_str().unwrap(),
            "-f",
            d.join("c.yaml").to_str().unwrap(),
            "-f",
            "-",
        ],
        &format!("{FOO}metadata: {{name: stdin}}\n"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c", "stdin"]);
    for d in &docs {
        assert_eq!(
            d["apiVersion"],
            "samplecontroller.team1.example.com/v1alpha1"
        );
    }
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn a_render_error_names_the_file_and_its_own_line() {
    let d = tmp("render-error");
    let cfg = config(&d);
    write(
        &d.join("good.yaml"),
        &format!("{FOO}metadata: {{name: a}}\n---\n{FOO}metadata: {{name: b}}\n"),
    );
    write(
        &d.join("bad.yaml"),
        "apiVersion: v1\nkind: X\nmetadata:\n  name: [unclosed\n",
    );
    let bad = d.join("bad.yaml");
    // render, check and inject say the same, for the same files: the bad
    // file's own line 4, not line 10 of everything concatenated, and the
    // parser's snippet names the file too.
    for cmd in ["render", "check", "inject"] {
        let out = regroup(
            &[
                cmd,
                "-c",
                cfg.to_str().unwrap(),
                "-f",
                d.join("good.yaml").to_str().unwrap(),
                "-f",
                bad.to_str().unwrap(),
            ],
            "",
        );
        assert!(!out.status.success(), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{}: document 1 (line 4)", bad.display())),
            "{cmd}: {err}"
        );
        assert!(
            err.contains(&format!(" --> {}:4:", bad.display())),
            "{cmd}: {err}"
        );
        assert!(!err.contains("<input>"), "{cmd}: {err}");
    }
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn serve_listen_address_errors_say_the_accepted_forms() {
    let out = regroup(&["serve", "-c", "/nonexistent", "--listen", "nope:1"], "");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`:PORT` (127.0.0.1) or `localhost:PORT`"),
        "{err}"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn serve_takes_colon_port_localhost_and_the_log_flags() {
    let d = tmp("serve");
    let cfg = config(&d);
    let kc = d.join("kubeconfig");
    write(
        &kc,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {}\n",
    );
    let (http, metrics) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_regroup"))
        .args([
            "serve",
            "-c",
            cfg.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--listen",
            &format!(":{http}"),
            "--metrics",
            &format!("localhost:{metrics}"),
            "--log-format",
            "json",
            "--log-level",
            "warn",
        ])
        .env_remove("REGROUP_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut livez = None;
    while Instant::now() < deadline {
        livez = get(metrics, "/livez");
        if livez.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let sidecar = get(http, "/version");
    child.kill().unwrap();
    child.wait().unwrap();
    let lines: Vec<String> = BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .collect();
    std::fs::remove_dir_all(&d).ok();
    let livez = livez.unwrap_or_else(|| panic!("no metrics listener: {lines:#?}"));
    assert!(livez.starts_with("HTTP/1.1 200"), "{livez}");
    // `:PORT` is the loopback plain-HTTP listener: it answers (the
    // upstream is down: a Status, not a refused connection).
    assert!(sidecar.is_some(), "{lines:#?}");
    // JSON lines, at warn level: the failed /version is logged, the
    // start-up INFO lines are not.
    assert!(!lines.is_empty());
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(v["level"] == "WARN" || v["level"] == "ERROR", "{l}");
    }
    assert!(
        lines.iter().any(|l| l.contains("\"path\":\"/version\"")),
        "{lines:#?}"
    );
}
