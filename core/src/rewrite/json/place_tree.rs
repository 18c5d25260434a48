//! Where an object's places end, found by walking the tree of its type's
//! places ([`PlaceTree`]) once: each container on the way is listed once
//! and each member's name read once, against the names the places ask for
//! there. Each place is visited exactly where walking it alone
//! (`JsonRewriter::place`) would visit it: the byte search that lets a
//! place go into a value holds for every value around it too (a mapped
//! name inside a value is inside every value around it), so checking it
//! where the place ends suffices, and the tree goes on past a value only
//! while some place below would.

use super::{JsonRewriter, RewriteError};
use crate::rewrite::catalog::{Node, PlaceTree, Visit};
use crate::rewrite::raw::{Members, Raw, Walk};

impl JsonRewriter<'_> {
    /// Pushes onto `found`, as `(position of the place in its type's
    /// list, value)`, every value below `raw` (node `n` of `tree`) at which
    /// a place ends and would be applied. `hidden_ok`: every value above
    /// held a mapped name or a member hiding names (what a
    /// [`Visit::NamedOrHidden`] place asks of the values on its way).
    /// `excluded`: the object's metadata places are skipped. `listed`:
    /// `raw`'s members when the caller has them already.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn places_in<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        tree: &PlaceTree,
        n: usize,
        hidden_ok: bool,
        excluded: bool,
        found: &mut Vec<(usize, Raw<'i>)>,
        listed: Option<&Members<'i>>,
    ) -> Result<(), RewriteError> {
        let node = &tree.nodes[n];
        let named = self.may(w, raw);
        leaves_at(node, raw, named, hidden_ok, excluded, found);
        if node.children.is_empty() {
            return Ok(());
        }
        let [where_named, always, named_or_hidden] = [
            node.below[Visit::WhereNamed as usize],
            node.below[Visit::Always as usize],
            node.below[Visit::NamedOrHidden as usize],
        ];
        let hidden_ok = named_or_hidden && hidden_ok && (named || self.may_or_hides(w, raw));
        if !(always || (where_named && named) || hidden_ok) {
            return Ok(());
        }
        if node.key_lengths != 0 {
            let ms = match listed {
                Some(ms) => Some(ms.clone()),
                None => w.members(raw)?,
            };
            if let Some(ms) = ms {
                for (name, m) in ms.names_and_entries() {
                    if let Some(c) = node.key_child(name) {
                        let v = ms.value_of(m);
                        let child = &tree.nodes[c];
                        if child.children.is_empty() {
                            // Only places end there (an `apiVersion`):
                            // no call, no member listing.
                            let named = self.may(w, v);
                            leaves_at(child, v, named, hidden_ok, excluded, found);
                        } else {
                            self.places_in(w, v, tree, c, hidden_ok, excluded, found, None)?;
                        }
                    }
                }
            }
        }
        if let Some(c) = node.each {
            if let Some(es) = w.elements(raw)? {
                for e in es.iter() {
                    self.places_in(w, e, tree, c, hidden_ok, excluded, found, None)?;
                }
            }
        }
        Ok(())
    }
}

/// Pushes the places ending at `node` that would be applied to `raw`:
/// `named` says the byte search found a mapped name in it, `hidden_ok`
/// as for [`JsonRewriter::places_in`].
#[inline(always)]
fn leaves_at<'i>(
    node: &Node,
    raw: Raw<'i>,
    named: bool,
    hidden_ok: bool,
    excluded: bool,
    found: &mut Vec<(usize, Raw<'i>)>,
) {
    for leaf in &node.leaves {
        if excluded && leaf.metadata {
            continue;
        }
        let visit = match leaf.visit {
            Visit::WhereNamed => named,
            Visit::Always => true,
            Visit::NamedOrHidden => hidden_ok,
        };
        if visit {
            found.push((leaf.at, raw));
        }
    }
}
