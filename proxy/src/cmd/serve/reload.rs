//! Hot reload of the configuration file: on SIGHUP, and when the file
//! changes (its modification time, size or inode, polled every
//! [`POLL_EVERY`]; a Kubernetes ConfigMap volume swaps a symlink, which a
//! poll of the path sees without inotify's pitfalls on such volumes, and
//! with no extra dependency).
//!
//! The new file is parsed and validated exactly as at start. Valid: a new
//! [`Engine`] (rules and fields) is stored in [`Live`] and new requests use
//! it; requests in flight, open watches included, finish on the engine
//! they started with. Invalid: the configuration in force stays, the
//! problems are logged and `regroup_config_reloads_total{result="failed"}`
//! counts them. Sections that need a restart (listeners, upstream,
//! credentials, front, webhooks, logging, limits) are compared and a change is logged
//! as such; they keep their running values.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use regroup_config::Settings;

use crate::observe::metrics::Metrics;
use crate::pipeline::live::Live;
use crate::rewrite::{Catalog, Engine};

/// How often the configuration file is checked for a change.
pub const POLL_EVERY: Duration = Duration::from_secs(2);

/// The sections a reload can't change, as they were at start.
#[derive(Clone, PartialEq, Eq)]
pub struct Fixed(Vec<(&'static str, String)>);

impl Fixed {
    /// The restart-only sections of `s`.
    pub fn of(s: &Settings) -> Fixed {
        let f = &s.file;
        Fixed(vec![
            ("listeners", format!("{:?}", f.listeners)),
            ("upstream", format!("{:?}", f.upstream)),
            ("credentials", format!("{:?}", f.credentials)),
            ("front", format!("{:?}", f.front)),
            (
                "webhooks",
                format!(
                    "{:?}",
                    f.webhooks.as_ref().map(|w| (
                        w.listen,
                        (&w.cert_file, &w.key_file, &w.ca_file, &w.client_ca_file),
                        (&w.generated_dns_names, &w.backend_ca_file),
                        w.dangerous_insecure_backend,
                        w.hooks.iter().map(|h| &h.value).collect::<Vec<_>>()
                    ))
                ),
            ),
            ("logging", format!("{:?}", f.logging)),
            ("limits", format!("{:?}", s.limits)),
        ])
    }

    /// The sections that differ.
    pub fn changed(&self, new: &Fixed) -> Vec<&'static str> {
        self.0
            .iter()
            .zip(&new.0)
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, _)| a.0)
            .collect()
    }
}

use crate::file_stamp::{file_stamp as stamp, FileStamp as Stamp};

/// The reloader of one configuration file.
pub struct Reloader {
    path: PathBuf,
    live: Live,
    fixed: Fixed,
    stamp: Stamp,
    generation: i64,
    metrics: Arc<Metrics>,
}

impl Reloader {
    /// Watches `path`, whose settings `started` are in force in `live`.
    pub fn new(path: PathBuf, live: Live, started: &Settings, metrics: Arc<Metrics>) -> Reloader {
        let stamp = stamp(&path);
        Reloader {
            path,
            live,
            fixed: Fixed::of(started),
            stamp,
            generation: 1,
            metrics,
        }
    }

    /// The generation in force (1 at start).
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// True when the file changed since the last look.
    pub fn changed(&mut self) -> bool {
        let now = stamp(&self.path);
        if now != self.stamp {
            self.stamp = now;
            return true;
        }
        false
    }

    /// Reads, validates and (if valid) puts the file in force.
    pub fn reload(&mut self, why: &str) -> Result<(), ReloadError> {
        self.stamp = stamp(&self.path);
        let result = std::fs::read_to_string(&self.path)
            .map_err(|source| ReloadError::Read {
                path: self.path.clone(),
                source,
            })
            .and_then(|text| regroup_config::load(&text).map_err(ReloadError::Config));
        let settings = match result {
            Ok(s) => s,
            Err(e) => {
                self.metrics.reload("failed");
                tracing::error!(
                    config = %self.path.display(),
                    trigger = why,
                    generation = self.generation,
                    "configuration NOT reloaded, the one in force stays: {e}"
                );
                return Err(e);
            }
        };
        for w in settings.warnings() {
            tracing::warn!("{w}");
        }
        let restart = self.fixed.changed(&Fixed::of(&settings));
        self.live.store(Engine::new(
            settings.map.clone(),
            Catalog::for_map(&settings.fields, &settings.map),
        ));
        self.generation += 1;
        self.metrics.reload("ok");
        self.metrics.set_generation(self.generation);
        tracing::info!(
            config = %self.path.display(),
            trigger = why,
            generation = self.generation,
            rules = settings.map.rules().len(),
            "configuration reloaded: new requests use the new rules and fields"
        );
        if !restart.is_empty() {
            tracing::warn!(
                sections = %restart.join(", "),
                "these sections changed but take effect only at restart; their running values stay"
            );
        }
        Ok(())
    }
}

/// Why the configuration file was not reloaded (the one in force stays).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file can't be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid configuration (its lines joined by `; `: one
    /// log line).
    #[error("{}", .0.to_string().replace('\n', "; "))]
    Config(#[source] regroup_config::ConfigError),
}

/// SIGHUP, installed now (before it is first awaited: a SIGHUP that came
/// in between would otherwise end the process, its default action).
#[cfg(unix)]
pub type Hangup = tokio::signal::unix::Signal;
/// No SIGHUP off Unix.
#[cfg(not(unix))]
pub type Hangup = ();

/// Installs the SIGHUP handler (must run inside the runtime).
pub fn hangup() -> Result<Hangup, std::io::Error> {
    #[cfg(unix)]
    {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
    }
    #[cfg(not(unix))]
    Ok(())
}

/// Reloads on SIGHUP and on a change of the file, until the task is dropped.
#[allow(unused_mut, unused_variables)]
pub async fn watch(mut r: Reloader, mut hup: Hangup) {
    let mut tick = tokio::time::interval(POLL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        #[cfg(unix)]
        let hup_recv = hup.recv();
        #[cfg(not(unix))]
        let hup_recv = std::future::pending::<Option<()>>();
        tokio::select! {
            _ = hup_recv => { let _ = r.reload("SIGHUP"); }
            _ = tick.tick() => {
                if r.changed() {
                    let _ = r.reload("file changed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::engine::tests::engine;

    const A: &str = "rules:\n- {from: a.example.io, to: a.team1.example.com}\n";
    const AB: &str = "rules:\n- {from: a.example.io, to: a.team1.example.com}\n- {from: b.example.io, to: b.team1.example.com}\n";

    #[test]
    fn a_valid_file_replaces_the_engine_an_invalid_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("regroup-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("config.yaml");
        std::fs::write(&p, A).unwrap();
        let started = regroup_config::load(A).unwrap();
        let live = Live::new(engine("a.team1.example.com"));
        let mut r = Reloader::new(p.clone(), live.clone(), &started, Default::default());
        let held = live.load();
        std::fs::write(&p, AB).unwrap();
        r.reload("test").unwrap();
        assert_eq!(r.generation(), 2);
        let now = live.load();
        assert_ne!(held.tag(), now.tag(), "a new engine is in force");
        std::fs::write(&p, "rules: [{from: apps, to: x.example.com}]\n").unwrap();
        assert!(r.reload("test").is_err());
        assert_eq!(live.load().tag(), now.tag(), "the old one stays");
        assert_eq!(r.generation(), 2);
        // A restart-only section is reported.
        let with_listener = format!("{AB}listeners: {{http: 127.0.0.1:9999}}\n");
        let changed =
            Fixed::of(&started).changed(&Fixed::of(&regroup_config::load(&with_listener).unwrap()));
        assert_eq!(changed, ["listeners"]);
        std::fs::remove_dir_all(&dir).ok();
    }
}
