//! The places of one type as a tree of their paths' steps: places that
//! share a prefix (`metadata.` for most of them) share its nodes, so a
//! walk lists each container on the way once and reads each member's name
//! once, matching it against the names the places ask for there, instead
//! of once per place. Built once per type with the catalog's per-type
//! index; the places themselves stay the catalog's rows.

use regroup_config::field_path::Step;

use super::{is_metadata_slot, Place, Slot};
use crate::rewrite::same_bytes::same_bytes;

/// How a place decides whether to go into a value (see the JSON walk's
/// `place`): most only where a mapped name shows in its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    /// Where the byte search finds a mapped name.
    WhereNamed,
    /// Always ([`Slot::DropShadowed`]: it must see every entry).
    Always,
    /// Where a mapped name shows or a member that hides names
    /// ([`Slot::Base64JsonPatch`]); the place's own value always.
    NamedOrHidden,
}

impl Visit {
    pub(super) fn of(slot: &Slot) -> Visit {
        match slot {
            Slot::DropShadowed(_) => Visit::Always,
            Slot::Base64JsonPatch => Visit::NamedOrHidden,
            _ => Visit::WhereNamed,
        }
    }
}

/// A place whose path ends at a node.
#[derive(Clone, Copy, Debug)]
pub struct Leaf {
    /// Its position in the type's list of places.
    pub at: usize,
    pub visit: Visit,
    /// A `metadata:` place, skipped in an excluded object.
    pub metadata: bool,
}

/// One step of the places' paths, from its parent node.
#[derive(Clone, Debug)]
pub struct Node {
    /// The step into this node (the root's is never read).
    pub step: Step,
    /// The places whose paths end here.
    pub leaves: Vec<Leaf>,
    /// The nodes one step further, in the order the places first name
    /// them.
    pub children: Vec<usize>,
    /// The children stepped into by a member name: the name and the node.
    pub keys: Vec<(Box<[u8]>, usize)>,
    /// Bit `min(len, 63)` set for each length of `keys`' names: most
    /// member names are ruled out by their length alone, without a
    /// comparison per child.
    pub key_lengths: u64,
    /// The child stepped into by every element of an array.
    pub each: Option<usize>,
    /// Which ways of visiting the places below this node (not those ending
    /// here) take: the walk goes on only where one of them would.
    pub below: [bool; 3],
}

impl Node {
    fn new(step: Step) -> Node {
        Node {
            step,
            leaves: Vec::new(),
            children: Vec::new(),
            keys: Vec::new(),
            key_lengths: 0,
            each: None,
            below: [false; 3],
        }
    }

    /// The bit of a member name of `len` bytes in [`key_lengths`](Self::key_lengths).
    #[inline]
    pub fn length_bit(len: usize) -> u64 {
        1 << len.min(63)
    }

    /// The child a member named `name` steps into, if any.
    #[inline]
    pub fn key_child(&self, name: &[u8]) -> Option<usize> {
        if self.key_lengths & Node::length_bit(name.len()) == 0 {
            return None;
        }
        self.keys
            .iter()
            .find(|(k, _)| same_bytes(k, name))
            .map(|(_, c)| *c)
    }
}

/// The tree of one type's places; node 0 is the object itself.
#[derive(Clone, Debug)]
pub struct PlaceTree {
    pub nodes: Vec<Node>,
    /// The positions of the places a walk visits whatever the tree finds:
    /// those applied from the object itself (a Table's rows, short forms)
    /// and those holding embedded objects (whose first key the reference
    /// heuristic leaves alone). With the places the tree found, they are
    /// all the walk of an object visits, not every place of its type.
    pub visited: Vec<usize>,
}

impl PlaceTree {
    /// The tree of `places` (the type's list, in order): places applied
    /// from the object itself (a Table's rows, short forms) are left
    /// out, the walk applies them in their turn.
    pub fn new<'p>(places: impl IntoIterator<Item = &'p Place>) -> PlaceTree {
        let mut nodes = vec![Node::new(Step::Each)];
        let mut visited = Vec::new();
        for (at, place) in places.into_iter().enumerate() {
            let from_object = PlaceTree::from_object(&place.slot);
            if from_object || PlaceTree::embeds(&place.slot) {
                visited.push(at);
            }
            if from_object {
                continue;
            }
            let visit = Visit::of(&place.slot);
            let mut n = 0;
            for step in place.path.steps() {
                nodes[n].below[visit as usize] = true;
                n = match nodes[n].children.iter().find(|c| nodes[**c].step == *step) {
                    Some(c) => *c,
                    None => {
                        nodes.push(Node::new(step.clone()));
                        let c = nodes.len() - 1;
                        let parent = &mut nodes[n];
                        parent.children.push(c);
                        match step {
                            Step::Key(k) => {
                                parent.keys.push((k.as_bytes().into(), c));
                                parent.key_lengths |= Node::length_bit(k.len());
                            }
                            Step::Each => parent.each = Some(c),
                        }
                        c
                    }
                };
            }
            nodes[n].leaves.push(Leaf {
                at,
                visit,
                metadata: is_metadata_slot(&place.slot),
            });
        }
        PlaceTree { nodes, visited }
    }

    /// True for the places applied from the object itself, not at the
    /// end of their path.
    pub fn from_object(slot: &Slot) -> bool {
        matches!(slot, Slot::TableRows { .. } | Slot::ShortForm { .. })
    }

    /// True for the places whose values are objects of their own.
    pub fn embeds(slot: &Slot) -> bool {
        matches!(slot, Slot::Object | Slot::Items | Slot::TableRows { .. })
    }
}
