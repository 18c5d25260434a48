//! The real `regroup` binary for tests that drive it as a process: started
//! against a loopback upstream with a config of the test's own, its log in
//! a directory of its own, killed on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The token regroup's kubeconfig gives it (never to be logged or lent).
pub const OWN_TOKEN: &str = "regroup-own-token";

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process killed (and reaped) on drop.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until something listens on loopback `port` (at most 20 s).
pub async fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "{what} did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The real binary, killed on drop.
pub struct Regroup {
    pub child: Child,
    pub port: u16,
    pub metrics: u16,
    pub dir: PathBuf,
}

impl Drop for Regroup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Regroup {
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("regroup.log")).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig}");
    }

    /// The request lines of the log.
    pub fn request_lines(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains(" regroup::request: "))
            .map(str::to_owned)
            .collect()
    }

    pub fn terminate(&mut self) {
        let ok = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "did not exit:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("regroup-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn write_kubeconfig(dir: &std::path::Path, upstream_port: u16) {
    std::fs::write(
        dir.join("kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{upstream_port}'}}}}]\n\
             contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n\
             users: [{{name: u, user: {{token: {OWN_TOKEN}}}}}]\n"
        ),
    )
    .unwrap();
}

/// A kubeconfig for a TLS upstream on 127.0.0.1:`port` trusted by
/// `ca_pem`, regroup's own credential the token.
pub fn tls_kubeconfig(port: u16, ca_pem: &str) -> String {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', \
         certificate-authority-data: '{ca}'}}}}]\n\
         contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n\
         users: [{{name: u, user: {{token: {OWN_TOKEN}}}}}]\n"
    )
}

/// `regroup check` on `config`: whether it accepted it, and what it said.
pub fn check(name: &str, config: &str) -> (bool, String) {
    let dir = test_dir(name);
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_regroup"))
        .arg("check")
        .arg("-c")
        .arg(dir.join("config.yaml"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    (out.status.success(), said)
}

/// `regroup check` on `config`, which it must refuse: what it said.
pub fn check_refuses(name: &str, config: &str) -> String {
    let (accepted, said) = check(name, config);
    assert!(!accepted, "{config}: {said}");
    said
}

/// Reads `s` until the peer ends it, waiting at most `within` (a
/// functional wait): what was read, or `Err` with it when the stream is
/// still open then.
pub async fn read_to_end_within(
    s: &mut tokio::net::TcpStream,
    within: std::time::Duration,
) -> Result<String, String> {
    use tokio::io::AsyncReadExt as _;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let ended = tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let got = String::from_utf8_lossy(&got).into_owned();
    ended.map(|()| got.clone()).map_err(|_| got)
}

/// Starts `regroup serve` with `extra` appended to the config (listeners
/// http and metrics are set here) and waits until it listens.
pub async fn start(name: &str, upstream_port: u16, extra: &str) -> Regroup {
    let dir = test_dir(name);
    write_kubeconfig(&dir, upstream_port);
    launch(dir, extra).await
}

/// Like [`start`], with a kubeconfig of the test's own (`kubeconfig`, the
/// file's text).
pub async fn start_with_kubeconfig(name: &str, kubeconfig: &str, extra: &str) -> Regroup {
    let dir = test_dir(name);
    std::fs::write(dir.join("kubeconfig"), kubeconfig).unwrap();
    launch(dir, extra).await
}

async fn launch(dir: PathBuf, extra: &str) -> Regroup {
    let (port, metrics) = (free_port(), free_port());
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "rules:\n- from: samplecontroller.k8s.io\n  to: samplecontroller.team1.example.com\n\
             listeners:\n  http: 127.0.0.1:{port}\n  metrics: 127.0.0.1:{metrics}\n{extra}"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("regroup.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_regroup"))
        .arg("serve")
        .arg("-c")
        .arg(dir.join("config.yaml"))
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .env("REGROUP_LOG", "regroup=debug")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let r = Regroup {
        child,
        port,
        metrics,
        dir,
    };
    wait_listening(port, &r).await;
    wait_listening(metrics, &r).await;
    r
}

pub async fn wait_listening(port: u16, r: &Regroup) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "regroup did not listen on {port}:\n{}",
            r.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One raw HTTP/1.1 exchange on a connection of its own (the request as
/// bytes, exactly as written, read to the connection's end): the status
/// code and the whole answer as text.
pub async fn raw(port: u16, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut out))
        .await
        .expect("an answer within 20 s")
        .ok();
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, text)
}

/// One GET with `Connection: close`: the status code and the body.
pub async fn get(port: u16, path: &str) -> (u16, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let (code, text) = raw(port, request.as_bytes()).await;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}
