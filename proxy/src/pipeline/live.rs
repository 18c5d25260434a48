//! The live configuration: one swappable engine. Each request loads it once
//! and keeps that engine to its end (a watch included), so a new
//! configuration applies to new requests without a lock on the request
//! path and without leaking the old one.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::rewrite::Engine;

/// The engine in force, shared by the listeners.
#[derive(Clone)]
pub struct Live(Arc<ArcSwap<Engine>>);

impl Live {
    /// Starts with `engine`.
    pub fn new(engine: Engine) -> Live {
        Live(Arc::new(ArcSwap::from_pointee(engine)))
    }

    /// The engine for one request.
    pub fn load(&self) -> Arc<Engine> {
        self.0.load_full()
    }

    /// Puts a new engine in force for the requests that start from now on.
    pub fn store(&self, engine: Engine) {
        self.0.store(Arc::new(engine));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rewrite::engine::tests::engine;

    #[test]
    fn a_request_keeps_its_engine_when_a_new_one_is_stored() {
        let live = Live::new(engine("b.example.com"));
        let held = live.load();
        live.store(engine("c.example.com"));
        assert_ne!(held.tag(), live.load().tag());
        assert_eq!(held.tag(), engine("b.example.com").tag());
    }
}
