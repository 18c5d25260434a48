//! Watch streams renamed event by event as they arrive. An event that can't
//! be renamed ends the stream (a JSON watch with an `ERROR` event), so the
//! client re-lists rather than see unrenamed bytes.

use std::sync::Arc;

use http::header;
use http::Response;

use super::exchange::{Answer, Exchange, Forward};
use crate::body::budget::Held;
use crate::body::Body;
use crate::body::{rewrite_frames, Rewritten};
use crate::hooks::Ctx;
use crate::kube::MediaType;
use crate::observe::metrics::Metrics;
use crate::rewrite::framing::Framing;
use crate::rewrite::{Catalog, Context};
use crate::status::Failure;

/// Renames a watch response's stream.
pub(crate) fn rename_events(
    fwd: &Forward,
    x: &Exchange,
    ctx: Arc<Ctx>,
    answer: Answer,
    held: Held,
) -> Result<Response<Body>, Failure> {
    let (mut parts, body) = (answer.parts, answer.body);
    let hooks = x.hooks.clone();
    if answer.gzip {
        return Err(Failure::bad_gateway(
            "gzip-encoded watch streams are not supported",
        ));
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    let framing = match answer.media {
        MediaType::Protobuf => Framing::LengthPrefixed,
        _ => Framing::Lines,
    };
    let engine = x.engine.clone();
    let dir = fwd.dir.flip();
    // Counted open until the stream (and so this closure) is dropped.
    let open = OpenWatch::new(fwd.listener, fwd.metrics.clone());
    let addressed = x.kind().map(|k| (x.info.group.to_string(), k));
    // Only CRDs, APIServices (their names carry a group) and the kinds
    // `names:` lists can be hidden, and a watch is on one resource: other
    // watches skip the check.
    let may_hide =
        x.info.resource.as_deref().is_some_and(|r| {
            Catalog::name_form_of_resource(engine.map(), &x.info.group, r).is_some()
        });
    // An event is one object.
    let body = rewrite_frames(
        body,
        framing,
        fwd.limits.object,
        held,
        move |event| {
            let _open = &open;
            let cx = Context {
                hint: None,
                addressed: addressed.as_ref().map(|(g, k)| (g.as_str(), *k)),
            };
            if may_hide && engine.hides_event(dir, framing, cx, event)? {
                // A shadowed group's CRD or APIService: never shown.
                return Ok(Rewritten::Dropped);
            }
            let out = engine.watch_event(dir, framing, cx, event)?;
            let out = hooks.watch_event(&ctx, framing, event, out)?;
            Ok(out.map_or(Rewritten::Same, Rewritten::New))
        },
        move |e| {
            Failure::bad_gateway(format!(
                "a watch event from the API server can't be renamed: {e}"
            ))
            .watch_error_event(framing)
        },
    );
    Ok(Response::from_parts(parts, body))
}

/// One open watch in `regroup_open_watches`, until dropped.
struct OpenWatch(&'static str, Arc<Metrics>);

impl OpenWatch {
    fn new(listener: &'static str, metrics: Arc<Metrics>) -> OpenWatch {
        metrics.open_watches_add(listener, 1);
        OpenWatch(listener, metrics)
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.1.open_watches_add(self.0, -1);
    }
}
