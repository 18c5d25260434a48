//! regroup's own upstream credential, as a vault (Kopf's model): one
//! source (a static token or basic auth, a token file, an exec plugin,
//! client-certificate files), its credential cached with its expiry and
//! refreshed a little before it, one refresh at a time however many
//! requests wait for it, a failing source retried with backoff, and a
//! credential the apiserver answered 401 to invalidated so the next request
//! gets a fresh one.
//!
//! Only regroup's own identity lives here: an app's passed-through token is
//! never cached, refreshed or retried with regroup's.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwapOption;
use http::HeaderValue;

use super::exec::{self, ExecOutput};
use super::kubeconfig::ExecConfig;
use super::tallies::Tallies;
use crate::file_stamp::{file_stamp, FileStamp};

/// A credential is refreshed this long before it expires, at most (less
/// for short-lived ones: a fifth of their lifetime).
const REFRESH_BEFORE: Duration = Duration::from_secs(30);
/// How often files (token, client certificate) are checked for a change.
const FILE_CHECK_EVERY: Duration = Duration::from_secs(1);
/// The first retry of a failing source, doubled each time up to `BACKOFF_MAX`.
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Where regroup's own credential comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// No `Authorization` (a client certificate alone, or nothing).
    None,
    /// A fixed header value (`Bearer` token or `Basic`).
    Static(HeaderValue),
    /// A bearer token read from a file, re-read when it changes.
    TokenFile(PathBuf),
    /// An exec credential plugin.
    Exec(Box<ExecConfig>),
}

impl Source {
    /// The metrics label of this source.
    pub fn label(&self) -> &'static str {
        match self {
            Source::None => "none",
            Source::Static(_) => "static",
            Source::TokenFile(_) => "token_file",
            Source::Exec(_) => "exec",
        }
    }
}

/// Why regroup has no credential to send. `Clone`: the last failure is
/// kept and handed to every caller until the next attempt, so the sources
/// are shared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CredentialError {
    /// The token file can't be read.
    #[error("token file {}: {source}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// The token file's token can't be a header.
    #[error("token file {}: {source}", path.display())]
    TokenFileValue {
        /// The file.
        path: PathBuf,
        /// Why.
        source: InvalidToken,
    },
    /// A client certificate or key file can't be read.
    #[error("client certificate {}: {source}", path.display())]
    ClientCertificate {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Arc<std::io::Error>,
    },
    /// The exec plugin gave no credential.
    #[error(transparent)]
    Exec(Arc<exec::ExecError>),
    /// The exec plugin's token can't be a header.
    #[error("exec plugin `{command}`: {source}")]
    ExecToken {
        /// The plugin's command.
        command: String,
        /// Why.
        source: InvalidToken,
    },
}

/// A token that can't be sent in an `Authorization` header (its value is
/// never quoted).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("token is not a valid header value")]
pub struct InvalidToken;

/// One credential, as obtained.
pub struct Credential {
    /// The `Authorization` header, if the source gives one.
    pub authorization: Option<HeaderValue>,
    /// A PEM client certificate and key, if the source gives one.
    pub client_cert: Option<Arc<(Vec<u8>, Vec<u8>)>>,
    /// When the source said it expires.
    pub expires: Option<SystemTime>,
    /// Which refresh produced it (for [`Vault::invalidate`]).
    pub generation: u64,
    obtained: SystemTime,
    /// The files it was read from, as they were (for a change check).
    stamp: Vec<FileStamp>,
    /// Millis since the vault's epoch of the last file check.
    checked: AtomicU64,
    /// The apiserver refused it (401).
    invalid: AtomicBool,
}

#[derive(Default)]
struct Backoff {
    failures: u32,
    retry_at: Option<Instant>,
    last_error: Option<CredentialError>,
}

/// The vault of regroup's own credential.
pub struct Vault {
    source: Source,
    /// Client certificate and key files, re-read when they change.
    cert_files: Option<(PathBuf, PathBuf)>,
    /// A fixed client certificate (kubeconfig data).
    fixed_cert: Option<Arc<(Vec<u8>, Vec<u8>)>>,
    current: ArcSwapOption<Credential>,
    /// Held while refreshing: one refresh at a time.
    refresh: tokio::sync::Mutex<Backoff>,
    generation: AtomicU64,
    epoch: Instant,
    /// Where credentials obtained and failures are counted (the upstream's).
    tallies: Arc<Tallies>,
}

impl Vault {
    /// A vault over `source`, with a client certificate from `cert_files`
    /// (re-read when they change) or the fixed `cert`, counting into
    /// `tallies`.
    pub fn new(
        source: Source,
        cert_files: Option<(PathBuf, PathBuf)>,
        cert: Option<(Vec<u8>, Vec<u8>)>,
        tallies: Arc<Tallies>,
    ) -> Vault {
        let v = Vault {
            source,
            cert_files,
            fixed_cert: cert.map(Arc::new),
            current: ArcSwapOption::empty(),
            refresh: tokio::sync::Mutex::new(Backoff::default()),
            generation: AtomicU64::new(0),
            epoch: Instant::now(),
            tallies,
        };
        // Sources that need no process are read at once, so a synchronous
        // caller (and the first request) finds them.
        if !matches!(v.source, Source::Exec(_)) {
            if let Ok(c) = v.fetch_sync() {
                v.current.store(Some(Arc::new(c)));
            }
        }
        v
    }

    /// The source's metrics label.
    pub fn label(&self) -> &'static str {
        if matches!(self.source, Source::None) && self.cert_files.is_some() {
            "client_cert_files"
        } else {
            self.source.label()
        }
    }

    /// True when a refresh can give another credential than the one in use
    /// (so a 401 is worth a retry).
    pub fn can_refresh(&self) -> bool {
        matches!(self.source, Source::TokenFile(_) | Source::Exec(_)) || self.cert_files.is_some()
    }

    /// True when regroup has a credential of its own at all.
    pub fn has_credential(&self) -> bool {
        !matches!(self.source, Source::None)
            || self.cert_files.is_some()
            || self.fixed_cert.is_some()
    }

    /// The credential in hand, whatever its state, without waiting.
    pub fn cached(&self) -> Option<Arc<Credential>> {
        self.current.load_full()
    }

    /// A usable credential: the cached one while it is fresh, else one
    /// refresh (waiting for another caller's refresh when one is running).
    pub async fn get(&self) -> Result<Arc<Credential>, CredentialError> {
        if let Some(c) = self.current.load_full() {
            if self.usable(&c) {
                return Ok(c);
            }
        }
        let mut backoff = self.refresh.lock().await;
        let held = self.current.load_full();
        if let Some(c) = &held {
            if self.usable(c) {
                return Ok(c.clone());
            }
        }
        let still_valid = held.filter(|c| {
            !c.invalid.load(Ordering::SeqCst) && c.expires.is_none_or(|e| e > SystemTime::now())
        });
        if let (Some(at), Some(e)) = (backoff.retry_at, &backoff.last_error) {
            if Instant::now() < at {
                return still_valid.ok_or_else(|| e.clone());
            }
        }
        let label = self.label();
        match self.fetch().await {
            Ok(c) => {
                let c = Arc::new(c);
                self.current.store(Some(c.clone()));
                *backoff = Backoff::default();
                self.tallies.credential(label, true);
                tracing::debug!(source = label, "obtained regroup's credential");
                Ok(c)
            }
            Err(e) => {
                self.tallies.credential(label, false);
                backoff.failures += 1;
                let wait = BACKOFF_MIN
                    .saturating_mul(1 << (backoff.failures - 1).min(10))
                    .min(BACKOFF_MAX);
                backoff.retry_at = Some(Instant::now() + wait);
                backoff.last_error = Some(e.clone());
                tracing::warn!(
                    source = label,
                    retry_in_seconds = wait.as_secs_f64(),
                    "cannot obtain regroup's credential: {e}"
                );
                still_valid.ok_or(e)
            }
        }
    }

    /// The apiserver refused the credential of `generation` (401): the next
    /// [`Vault::get`] fetches a fresh one. A later generation is left alone
    /// (another request already refreshed).
    pub fn invalidate(&self, generation: u64) {
        if let Some(c) = self.current.load_full() {
            if c.generation == generation && self.can_refresh() {
                c.invalid.store(true, Ordering::SeqCst);
            }
        }
    }

    fn now_millis(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn usable(&self, c: &Credential) -> bool {
        if c.invalid.load(Ordering::SeqCst) {
            return false;
        }
        if let Some(exp) = c.expires {
            let lifetime = exp.duration_since(c.obtained).unwrap_or_default();
            let margin = REFRESH_BEFORE.min(lifetime / 5);
            if SystemTime::now() + margin >= exp {
                return false;
            }
        }
        if !c.stamp.is_empty() {
            let now = self.now_millis();
            let last = c.checked.load(Ordering::Relaxed);
            if now.saturating_sub(last) >= FILE_CHECK_EVERY.as_millis() as u64 {
                if self.file_stamps() != c.stamp {
                    return false;
                }
                c.checked.store(now, Ordering::Relaxed);
            }
        }
        true
    }

    fn file_stamps(&self) -> Vec<FileStamp> {
        let mut v = Vec::new();
        if let Source::TokenFile(p) = &self.source {
            v.push(file_stamp(p));
        }
        if let Some((c, k)) = &self.cert_files {
            v.push(file_stamp(c));
            v.push(file_stamp(k));
        }
        v
    }

    fn fetch_sync(&self) -> Result<Credential, CredentialError> {
        let stamps = self.file_stamps();
        let authorization = match &self.source {
            Source::None | Source::Exec(_) => None,
            Source::Static(v) => Some(v.clone()),
            Source::TokenFile(p) => {
                let t = std::fs::read_to_string(p).map_err(|e| CredentialError::TokenFile {
                    path: p.clone(),
                    source: Arc::new(e),
                })?;
                Some(
                    bearer(t.trim()).map_err(|source| CredentialError::TokenFileValue {
                        path: p.clone(),
                        source,
                    })?,
                )
            }
        };
        let client_cert = match &self.cert_files {
            Some((c, k)) => {
                let read = |p: &PathBuf| {
                    std::fs::read(p).map_err(|e| CredentialError::ClientCertificate {
                        path: p.clone(),
                        source: Arc::new(e),
                    })
                };
                Some(Arc::new((read(c)?, read(k)?)))
            }
            None => self.fixed_cert.clone(),
        };
        Ok(self.credential(authorization, client_cert, None, stamps))
    }

    fn credential(
        &self,
        authorization: Option<HeaderValue>,
        client_cert: Option<Arc<(Vec<u8>, Vec<u8>)>>,
        expires: Option<SystemTime>,
        stamp: Vec<FileStamp>,
    ) -> Credential {
        Credential {
            authorization,
            client_cert,
            expires,
            generation: self.generation.fetch_add(1, Ordering::SeqCst) + 1,
            obtained: SystemTime::now(),
            stamp,
            checked: AtomicU64::new(self.now_millis()),
            invalid: AtomicBool::new(false),
        }
    }

    async fn fetch(&self) -> Result<Credential, CredentialError> {
        let Source::Exec(cfg) = &self.source else {
            return self.fetch_sync();
        };
        let ExecOutput {
            token,
            client_cert,
            expires,
        } = exec::run(cfg)
            .await
            .map_err(|e| CredentialError::Exec(Arc::new(e)))?;
        let authorization = match token {
            Some(t) => Some(bearer(&t).map_err(|source| CredentialError::ExecToken {
                command: cfg.command.clone(),
                source,
            })?),
            None => None,
        };
        let client_cert = client_cert
            .map(Arc::new)
            .or_else(|| self.fixed_cert.clone());
        Ok(self.credential(authorization, client_cert, expires, Vec::new()))
    }
}

/// `Bearer <token>`, marked sensitive.
pub fn bearer(token: &str) -> Result<HeaderValue, InvalidToken> {
    let mut v = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| InvalidToken)?;
    v.set_sensitive(true);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("regroup-vault-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A plugin that counts its runs in `dir/runs`, sleeps a little, and
    /// prints token `t<n>` expiring `ttl` seconds from now; `dir/fail`
    /// makes it fail.
    fn plugin(d: &std::path::Path, ttl: i64) -> Source {
        let script = format!(
            r#"set -e
cd '{dir}'
if [ -e fail ]; then echo "no login: try again" >&2; exit 1; fi
n=$(( $(cat runs 2>/dev/null || echo 0) + 1 )); echo $n > runs
sleep 0.2
exp=$(date -u -d "@$(( $(date +%s) + {ttl} ))" +%Y-%m-%dT%H:%M:%SZ)
printf '{{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{{"token":"t%s","expirationTimestamp":"%s"}}}}' $n $exp
"#,
            dir = d.display()
        );
        Source::Exec(Box::new(ExecConfig {
            api_version: "client.authentication.k8s.io/v1beta1".into(),
            command: "sh".into(),
            args: vec!["-c".into(), script],
            ..ExecConfig::default()
        }))
    }

    fn runs(d: &std::path::Path) -> u32 {
        std::fs::read_to_string(d.join("runs"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }

    fn token(c: &Credential) -> String {
        c.authorization
            .as_ref()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hundred_concurrent_requests_run_the_plugin_once() {
        let d = dir("flight");
        let vault = Arc::new(Vault::new(plugin(&d, 3600), None, None, Default::default()));
        let tasks: Vec<_> = (0..100)
            .map(|_| {
                let v = vault.clone();
                tokio::spawn(async move { token(&v.get().await.unwrap()) })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap(), "Bearer t1");
        }
        assert_eq!(runs(&d), 1);
        // Cached until (nearly) expiry.
        assert_eq!(token(&vault.get().await.unwrap()), "Bearer t1");
        assert_eq!(runs(&d), 1);
    }

    #[tokio::test]
    async fn a_401_invalidates_once_however_many_requests_saw_it() {
        let d = dir("invalidate");
        let vault = Vault::new(plugin(&d, 3600), None, None, Default::default());
        let c = vault.get().await.unwrap();
        // Two requests got 401 with generation 1: one refresh.
        vault.invalidate(c.generation);
        let fresh = vault.get().await.unwrap();
        vault.invalidate(c.generation);
        assert_eq!(token(&fresh), "Bearer t2");
        assert_eq!(token(&vault.get().await.unwrap()), "Bearer t2");
        assert_eq!(runs(&d), 2);
    }

    #[tokio::test]
    async fn a_credential_about_to_expire_is_refreshed_before() {
        let d = dir("expiry");
        // Expires in 2 s: refreshed when less than a fifth of that is left.
        let vault = Vault::new(plugin(&d, 2), None, None, Default::default());
        assert_eq!(token(&vault.get().await.unwrap()), "Bearer t1");
        tokio::time::sleep(Duration::from_millis(1800)).await;
        assert_eq!(token(&vault.get().await.unwrap()), "Bearer t2");
    }

    #[tokio::test]
    async fn a_failing_plugin_is_retried_with_backoff_and_reports_stderr() {
        let d = dir("backoff");
        std::fs::write(d.join("fail"), "").unwrap();
        let vault = Vault::new(plugin(&d, 3600), None, None, Default::default());
        let e = vault.get().await.err().unwrap();
        assert!(e.to_string().contains("no login: try again"), "{e}");
        // Within the backoff: the same error, no new run.
        std::fs::remove_file(d.join("fail")).unwrap();
        let e2 = vault.get().await.err().unwrap();
        assert_eq!(e.to_string(), e2.to_string());
        assert_eq!(runs(&d), 0);
        tokio::time::sleep(BACKOFF_MIN + Duration::from_millis(50)).await;
        assert_eq!(token(&vault.get().await.unwrap()), "Bearer t1");
    }

    #[tokio::test]
    async fn a_token_file_is_reread_when_it_changes() {
        let d = dir("tokenfile");
        let p = d.join("token");
        std::fs::write(&p, "one\n").unwrap();
        let vault = Vault::new(Source::TokenFile(p.clone()), None, None, Default::default());
        assert_eq!(token(&vault.get().await.unwrap()), "Bearer one");
        std::fs::write(d.join("new"), "two").unwrap();
        std::fs::rename(d.join("new"), &p).unwrap(); // as kubelet swaps it
        tokio::time::sleep(FILE_CHECK_EVERY + Duration::from_millis(50)).await;
        assert_eq!(token(&vault.get().await.unwrap()), "Bearer two");
    }
}
