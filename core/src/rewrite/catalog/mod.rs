//! The catalog: every place a group lives in a Kubernetes object.
//!
//! This is the one list of group-bearing fields (`places.rs` holds the
//! built-in rows; docs/architecture.md says how to add one). Codecs only walk: the JSON walker (`super::json`) applies these
//! places to `serde_json::Value`s, and the protobuf walker reads the same
//! places, translating each JSON field name to its proto field through the
//! descriptors' `json_name`. Nothing is renamed outside this list, except
//! the reference-key heuristic (string values of keys named `apiGroup` or
//! `apiVersion`), which [`Catalog::reference_keys_skip`] bounds.

use std::sync::OnceLock;

use regroup_config::field_path::{FieldPath, Step};
use regroup_config::{CustomField, Form, GroupMap};

mod metadata_places;
mod places;
mod short_form_places;
mod tree;

pub use metadata_places::is_metadata_slot;
pub use tree::{Leaf, Node, PlaceTree, Visit};

use places::{name_places, BUILTIN, RESOURCE_KINDS};

/// Which objects a place applies to, by the object's group (as the app names
/// it) and kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// Every object, whatever its kind.
    AnyObject,
    /// Every list (`kind` ending in `List` with an `items` array).
    AnyList,
    /// Objects of one of these groups and one of these kinds.
    Kinds {
        /// Accepted groups (`""` is core).
        groups: Vec<String>,
        /// Accepted kinds.
        kinds: Vec<String>,
    },
}

impl Selector {
    fn kinds(groups: &[&str], kinds: &[&str]) -> Selector {
        Selector::Kinds {
            groups: groups.iter().map(|s| s.to_string()).collect(),
            kinds: kinds.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// True when an object of `group`/`kind` (app names) is selected.
    pub fn matches(&self, group: &str, kind: &str) -> bool {
        match self {
            Selector::AnyObject => true,
            Selector::AnyList => kind.ends_with("List"),
            Selector::Kinds { groups, kinds } => {
                groups.iter().any(|g| g == group) && kinds.iter().any(|k| k == kind)
            }
        }
    }
}

/// What sits at a place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// A string naming a group in this form (each string, through `[]`).
    Value(Form),
    /// An embedded Kubernetes object that carries its own `apiVersion`/`kind`.
    Object,
    /// The `items` of a list: objects whose kind, when absent, is the list's
    /// kind without `List`.
    Items,
    /// A string holding JSON (an annotation the apiserver writes); inside
    /// it, the value at this path (applied to each element when the JSON is
    /// an array) names a group in this form.
    JsonString(&'static str, Form),
    /// A string holding a whole object as JSON (kubectl's
    /// `last-applied-configuration` annotation): renamed as the object it
    /// is, every place of its own kind, in the same direction. Text that is
    /// not JSON is left as it is and counted ([`crate::rewrite::tally`]).
    JsonObject,
    /// An array of discovery entries; in the app's direction, entries whose
    /// group (a string at this sub-path of the entry) is shadowed are dropped.
    /// Runs before the entries' own renames.
    DropShadowed(&'static str),
    /// An array of objects (a list's `items`): toward the app, objects
    /// that are **hidden** are dropped (toward the cluster, nothing is). An object is hidden when
    /// its kind's names carry a group (the kind has a `metadata.name` place
    /// of form `QualifiedName`, see [`Catalog::name_form`]) and that group is
    /// shadowed: the cluster's CRD `foos.samplecontroller.k8s.io` or
    /// APIService `v1alpha1.samplecontroller.k8s.io` when that name now
    /// means the renamed group. A GET of one is refused (its URL names a
    /// shadowed group); lists and watches must not show it either. Also
    /// hidden: an object of a kind listed in `names:` (a `metadata.name`
    /// place of form `ObjectName`) whose name is neither this copy's nor
    /// kept (`GroupMap::hides_name`).
    DropHidden,
    /// The rows of a Table (an array at this path): each row's cell that
    /// names the row's object is renamed in the form of that object's
    /// `metadata.name` place (`plural.group` of a CRD, `version.group` of
    /// an APIService), and rows naming a hidden object (see
    /// [`Slot::DropHidden`]) are dropped. The name cell is the one under the
    /// column whose definition (in the Table's `columns` array) has
    /// `format: name`; without definitions (the later events of a Table
    /// watch send `null`), the first, where every server-side printer puts
    /// the Name column. The row's kind is its object's (in the row member
    /// `object`), or the addressed kind when the object is metadata only or
    /// absent (`includeObject=None`). When the object carries a name, only a
    /// cell equal to it is renamed.
    TableRows {
        /// The Table member holding the column definitions.
        columns: &'static str,
        /// The row member holding the cells.
        cells: &'static str,
        /// The row member holding the object.
        object: &'static str,
    },
    /// The member names of a map whose keys are data (ResourceQuota's
    /// `hard` and `used`): each key names a group in this form, its value
    /// stays as it is. In protobuf, the keys of a map field.
    Keys(Form),
    /// A selector requirement (`{key, operator, values}` of a
    /// SubjectAccessReview's `fieldSelector`): as in a query's field
    /// selector, its values name a group when its key ends in `.apiVersion`
    /// (`group/version`) or `.apiGroup` (a group).
    Requirement {
        /// The member holding the selector key.
        key: &'static str,
        /// The member holding the values (an array of strings).
        values: &'static str,
    },
    /// A base64 string holding a JSON Patch (RFC 6902) of the object a
    /// review is about (an AdmissionReview's `response.patch`): each
    /// operation's value is renamed as the part of an object of that kind
    /// it lands in (`rewrite/json/json_patch.rs`). The kind is the caller's
    /// `addressed` (the review's `request.kind`, which the answer doesn't
    /// repeat); without it, only the places every object has apply.
    /// base64 hides names from the byte search, so this place is visited
    /// whenever its member name occurs ([`Catalog::encoded_members`]).
    Base64JsonPatch,
    /// An object naming another object by (group, resource, name) members
    /// (a Status's `details`): the name is a qualified name
    /// (`plural.group`, `version.group`) when that resource's names carry a
    /// group (see [`Catalog::names_carry_group`]), else left alone.
    NameOf {
        /// The member holding the API group.
        group: &'static str,
        /// The member holding the resource (plural).
        resource: &'static str,
        /// The member holding the name.
        name: &'static str,
    },
    /// A map of labels (an `ObjectMeta`'s `labels`, a selector's
    /// `matchLabels`, a Service's `selector`): each key renamed as a
    /// [`Form::MetadataKey`], each value by the label value rules of its
    /// key. Present only with `metadata:` rules (`metadata_places.rs`).
    Labels,
    /// A label selector requirement (`{key, operator, values}`): the key
    /// renamed as a [`Form::MetadataKey`], the values by the label value
    /// rules of that key.
    LabelRequirement {
        /// The member holding the key.
        key: &'static str,
        /// The member holding the values (an array of strings).
        values: &'static str,
    },
    /// A managed-fields entry's `fieldsV1` (JSON; in protobuf the `raw` of
    /// a `FieldsV1`): the `f:` members that record who owns a label,
    /// annotation or finalizer, renamed as the keys themselves, by the
    /// metadata places of the object's own kind.
    FieldsV1,
    /// An object naming another by type and name ([`RefMembers`]): the
    /// name is renamed in the form of the named kind's own `metadata.name`
    /// place ([`Catalog::name_form`]): a CRD's `plural.group`, or a kind
    /// listed in `names:`. Other names are left alone.
    NamedRef(RefMembers),
    /// An OpenAPI v3 schema of a CRD (JSON only: regroup's protobuf
    /// descriptors have no `apiextensions.k8s.io` types, and clients read
    /// CRDs as JSON), walked at every depth (`properties`,
    /// `patternProperties`, `additionalProperties`, `items`, `allOf`,
    /// `anyOf`, `oneOf`, `not`): each string of an `enum` and a string
    /// `default` are renamed as [`Form::Literal`] (only when exactly a
    /// mapped name), and the `rule` and `messageExpression` of each
    /// `x-kubernetes-validations` entry as [`Form::Cel`].
    JsonSchema,
    /// A short form at this place (a CRD's or a discovery entry's
    /// `shortNames[]` or `categories[]`), renamed in `form`
    /// ([`Form::ShortName`], [`Form::Category`]) only when the object's
    /// group is one the rules rename in this direction. The group is read
    /// at `group`, a dotted path from the **object's root** (a CRD's
    /// `spec.group`, an `APIResourceList`'s `groupVersion`, an
    /// `APIGroupDiscovery`'s `metadata.name`), in `group_form`, as the
    /// object arrived (codecs read their input, never their edits, so the
    /// order of places doesn't matter). Built-in groups' names (`po`,
    /// `all`) are never touched. Present only with `names.shortNamePrefix`
    /// (`short_form_places.rs`). These names carry no mapped name themselves,
    /// so once the group says yes the codecs walk to them without the byte
    /// search.
    ShortForm {
        /// The dotted path, from the object's root, of the group.
        group: &'static str,
        /// How `group` is written (`Group` or `ApiVersion`).
        group_form: Form,
        /// `ShortName` or `Category`.
        form: Form,
    },
}

/// The name slots of a reference to an object by its type and name: a
/// `roleRef` (`apiGroup`, `kind`, `name`), an owner reference or an Event's
/// `involvedObject` (`apiVersion`, `kind`, `name`), an AdmissionReview's
/// `request` (`kind.group`, `kind.kind`, `name`: members may be dotted
/// sub-paths in JSON; protobuf takes one-level members only). See
/// [`Slot::NamedRef`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefMembers {
    /// The member holding the group (`Form::Group`) or `group/version`
    /// (`Form::ApiVersion`).
    pub api: &'static str,
    /// How `api` names the group.
    pub api_form: Form,
    /// The member holding the kind.
    pub kind: &'static str,
    /// The member holding the name.
    pub name: &'static str,
}

/// One group-bearing place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// Which objects have it.
    pub selector: Selector,
    /// Where in the object.
    pub path: FieldPath,
    /// What is there.
    pub slot: Slot,
}

fn is_metadata_name(path: &FieldPath) -> bool {
    matches!(path.steps(), [Step::Key(m), Step::Key(n)] if m == "metadata" && n == "name")
}

/// Keys under which the reference-key heuristic never looks: free-form maps
/// whose keys are user data, not schema.
const HEURISTIC_SKIP_METADATA: &[&str] = &["labels", "annotations", "managedFields"];
/// Kinds whose answer carries the webhook's own annotations (`response.auditAnnotations`).
const REVIEW_KINDS: &[&str] = &["AdmissionReview"];
/// Kinds whose `data`-like members are opaque user data.
const OPAQUE_DATA_KINDS: &[&str] = &["ConfigMap", "Secret"];
const OPAQUE_DATA_KEYS: &[&str] = &["data", "binaryData", "stringData"];

/// Where groups live in OpenAPI documents, read
/// by both OpenAPI walkers (`rewrite/openapi.rs` for JSON, v2 and v3;
/// `rewrite/openapi_proto.rs` for gnostic protobuf, v2).
pub mod openapi {
    /// Root member whose keys are API paths (`/apis/{group}/...`, or
    /// `apis/{group}/{version}` in the v3 index); shadowed groups' entries
    /// are dropped.
    pub const PATHS: &str = "paths";
    /// Root member of the 1.24 v3 index: a list of API paths.
    pub const PATH_LIST: &str = "Paths";
    /// Root member (v2) whose keys are reverse-DNS definition names.
    pub const DEFINITIONS: &str = "definitions";
    /// Root member (v3) holding [`SCHEMAS`].
    pub const COMPONENTS: &str = "components";
    /// Member of [`COMPONENTS`] whose keys are reverse-DNS schema names.
    pub const SCHEMAS: &str = "schemas";
    /// Anywhere: a reference `#/definitions/NAME` or `#/components/schemas/NAME`.
    pub const REF: &str = "$ref";
    /// Anywhere: `{group, version, kind}` (an object on operations, a list on
    /// definitions); its `group` is renamed.
    pub const GVK: &str = "x-kubernetes-group-version-kind";
    /// In a v3 index entry: `/openapi/v3/apis/{group}/{version}?hash=...`.
    pub const SERVER_RELATIVE_URL: &str = "serverRelativeURL";
}

/// A Table column whose cells name an object as `Kind/NAME`
/// (`places::TABLE_CELLS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableCell {
    /// The group of the Tables' kind.
    pub group: &'static str,
    /// The Tables' kinds (the addressed kind).
    pub kinds: &'static [&'static str],
    /// The column's name in the Table's definitions.
    pub column: &'static str,
    /// The group of the kind each cell names: its name is renamed in the
    /// form [`Catalog::name_form`] gives that kind.
    pub names_of: &'static str,
}

/// The catalog in use: the built-in places plus the config's `fields`.
#[derive(Clone, Debug)]
pub struct Catalog {
    places: Vec<Place>,
    /// [`places_for`](Catalog::places_for), worked out once per type.
    by_type: ByType,
}

/// The places of each type, as indices into `places`: by group, then by
/// kind, for every type a [`Selector::Kinds`] names; every other type
/// takes `any_object`, or `any_list` when its kind ends in `List`.
#[derive(Clone, Debug, Default)]
struct ByType {
    kinds: foldhash::HashMap<String, foldhash::HashMap<String, TypePlaces>>,
    any_object: TypePlaces,
    any_list: TypePlaces,
}

/// One type's places ([`Catalog::type_places`]).
#[derive(Clone, Copy)]
pub struct TypePlacesOf<'a> {
    all: &'a [Place],
    of_type: &'a [usize],
    pub tree: &'a PlaceTree,
}

impl<'a> TypePlacesOf<'a> {
    /// The place at position `at` of the type's order.
    pub fn place(&self, at: usize) -> &'a Place {
        &self.all[self.of_type[at]]
    }
}

/// One type's places, as indices into the catalog's, and their tree.
#[derive(Clone, Debug)]
struct TypePlaces {
    places: Vec<usize>,
    tree: PlaceTree,
    /// [`Catalog::name_form`] of the type: the form of its first
    /// [`name_place`].
    name_form: Option<Form>,
}

impl Default for TypePlaces {
    fn default() -> TypePlaces {
        TypePlaces {
            places: Vec::new(),
            tree: PlaceTree::new([]),
            name_form: None,
        }
    }
}

/// The form of `p`'s value when it is the `metadata.name` of a kind whose
/// names carry a group.
fn name_place(p: &Place) -> Option<Form> {
    match p.slot {
        Slot::Value(form @ (Form::QualifiedName | Form::ObjectName | Form::FixedName))
            if is_metadata_name(&p.path) =>
        {
            Some(form)
        }
        _ => None,
    }
}

impl ByType {
    fn new(places: &[Place]) -> ByType {
        let select = |g: &str, k: &str| -> TypePlaces {
            let of_type: Vec<usize> = (0..places.len())
                .filter(|i| places[*i].selector.matches(g, k))
                .collect();
            TypePlaces {
                tree: PlaceTree::new(of_type.iter().map(|i| &places[*i])),
                name_form: of_type.iter().find_map(|i| name_place(&places[*i])),
                places: of_type,
            }
        };
        let mut by = ByType {
            // No group or kind is empty in a Kinds selector's lists.
            any_object: select("\0", "\0"),
            any_list: select("\0", "\0List"),
            ..ByType::default()
        };
        for p in places {
            if let Selector::Kinds { groups, kinds } = &p.selector {
                for g in groups {
                    for k in kinds {
                        let entry = by.kinds.entry(g.clone()).or_default();
                        if !entry.contains_key(k) {
                            entry.insert(k.clone(), select(g, k));
                        }
                    }
                }
            }
        }
        by
    }

    fn get(&self, group: &str, kind: &str) -> &TypePlaces {
        match self.kinds.get(group).and_then(|ks| ks.get(kind)) {
            Some(v) => v,
            None if kind.ends_with("List") => &self.any_list,
            None => &self.any_object,
        }
    }
}

impl Catalog {
    /// The built-in catalog plus app-specific fields from the config.
    pub fn new(custom: &[CustomField]) -> Catalog {
        let mut places: Vec<Place> = BUILTIN
            .iter()
            .map(|(groups, kinds, path, slot)| Place {
                selector: if groups.is_empty() {
                    if kinds == &["*List"] {
                        Selector::AnyList
                    } else {
                        Selector::AnyObject
                    }
                } else {
                    Selector::kinds(groups, kinds)
                },
                path: FieldPath::parse(path).expect("built-in catalog paths are valid"),
                slot: *slot,
            })
            .collect();
        places.extend(custom.iter().map(|f| Place {
            selector: Selector::kinds(&[&f.group], &[&f.kind]),
            path: f.path.clone(),
            slot: Slot::Value(f.form),
        }));
        Catalog::sorted(places)
    }

    /// The built-in catalog, the config's `fields`, and the name places of
    /// the kinds `names:` lists (`map`'s `ObjectNames`).
    pub fn for_map(custom: &[CustomField], map: &GroupMap) -> Catalog {
        let mut catalog = Catalog::new(custom);
        if map.object_names().is_some() || map.metadata().is_some() || map.short_names().is_some() {
            let mut places = std::mem::take(&mut catalog.places);
            if let Some(names) = map.object_names() {
                places.extend(name_places(names));
            }
            if map.metadata().is_some() {
                places.extend(metadata_places::metadata_places());
            }
            if map.short_names().is_some() {
                places.extend(short_form_places::short_form_places());
            }
            catalog = Catalog::sorted(places);
        }
        catalog
    }

    fn sorted(mut places: Vec<Place>) -> Catalog {
        // Shadowed entries must be dropped while they still carry the names
        // they arrived with, before any rename (the generic `items` too).
        places.sort_by_key(|p| !matches!(p.slot, Slot::DropShadowed(_) | Slot::DropHidden));
        let by_type = ByType::new(&places);
        Catalog { places, by_type }
    }

    /// The form of the names of the objects served at `group`/`resource`:
    /// `QualifiedName` for CRDs and APIServices, `ObjectName` for a kind
    /// listed in `map`'s `names:`; `None` for plain names. Used where a
    /// name comes with its resource, not its kind: URLs, `metadata.name`
    /// field selectors, a Status's details.
    pub fn name_form_of_resource(map: &GroupMap, group: &str, resource: &str) -> Option<Form> {
        if Catalog::names_carry_group(group, resource) {
            Some(Form::QualifiedName)
        } else if map
            .object_names()
            .is_some_and(|n| n.covers_resource(group, resource))
        {
            Some(Form::ObjectName)
        } else if map
            .object_names()
            .is_some_and(|n| n.fixes_resource(group, resource))
        {
            Some(Form::FixedName)
        } else {
            None
        }
    }

    /// The kind served at `group`/`resource`, for the built-in resources
    /// whose objects carry groups: partial bodies (merge patches) and
    /// metadata-only responses (which name only `PartialObjectMetadata`)
    /// still get their kind's places. Custom resources return `None`: their
    /// places are the generic ones and the reference-key heuristic.
    pub fn kind_for_resource(group: &str, resource: &str) -> Option<&'static str> {
        // Read twice a request (the URL's names, the answer's places),
        // most often for a custom resource: one match on the group turns
        // those away, where the list was compared entry by entry (~220
        // instructions a look-up).
        if !in_resource_kinds(group) {
            return None;
        }
        resource_kinds_of(group)
            .iter()
            .find(|(r, _)| *r == resource)
            .map(|(_, k)| *k)
    }

    /// True when the objects served at `group`/`resource` have names that
    /// carry a group (`plural.group`, `version.group`): the catalog has a
    /// `metadata.name` place for their kind. Their names are renamed in URLs
    /// and `metadata.name` selectors too.
    pub fn names_carry_group(group: &str, resource: &str) -> bool {
        let named = qualified_names();
        // Two groups have such kinds: any other is turned away before its
        // resources are looked up (~0.2k instructions a built-in
        // resource's request).
        if !named.iter().any(|&(g, _)| g == group) {
            return false;
        }
        let Some(kind) = Catalog::kind_for_resource(group, resource) else {
            return false;
        };
        named.iter().any(|&(g, k)| g == group && k == kind)
    }

    /// The form of the name of an object of `group`/`kind` (app names)
    /// when its names carry a group: the form of the kind's `metadata.name`
    /// place (`QualifiedName` for CRDs and APIServices). `None` for kinds
    /// whose names are plain names.
    pub fn name_form(&self, group: &str, kind: &str) -> Option<Form> {
        // Worked out per type with its places: one look-up, where the
        // kinds were compared selector by selector (~0.44k instructions an
        // owner reference).
        self.by_type.get(group, kind).name_form
    }

    /// The Table columns of `group`/`kind` whose cells name an object as
    /// `Kind/NAME` ([`TableCell`]).
    pub fn table_cells(&self, group: &str, kind: &str) -> impl Iterator<Item = &'static TableCell> {
        let (group, kind) = (group.to_owned(), kind.to_owned());
        places::TABLE_CELLS
            .iter()
            .filter(move |c| c.group == group && c.kinds.contains(&kind.as_str()))
    }

    /// The member names of places whose value hides names from a byte
    /// search ([`Slot::Base64JsonPatch`]), quoted as in JSON: a body
    /// holding one is walked even when no mapped name shows.
    pub fn encoded_members(&self) -> impl Iterator<Item = String> + '_ {
        self.places
            .iter()
            .filter_map(|p| match (p.slot, p.path.steps().last()) {
                (Slot::Base64JsonPatch, Some(Step::Key(k))) => Some(format!("\"{k}\"")),
                _ => None,
            })
    }

    /// Every place, in application order.
    pub fn places(&self) -> &[Place] {
        &self.places
    }

    /// The places of an object of `group`/`kind` (app names), in order.
    pub fn places_for<'a>(
        &'a self,
        group: &'a str,
        kind: &'a str,
    ) -> impl Iterator<Item = &'a Place> + 'a {
        self.by_type
            .get(group, kind)
            .places
            .iter()
            .map(|i| &self.places[*i])
    }

    /// The places of an object of `group`/`kind` (app names), in order,
    /// and their tree, whose leaves name them by their position in that
    /// order (the tests' view; the walk takes [`type_places`](Self::type_places)).
    #[cfg(test)]
    pub fn places_and_tree<'a>(
        &'a self,
        group: &str,
        kind: &str,
    ) -> (impl Iterator<Item = &'a Place> + 'a, &'a PlaceTree) {
        let t = self.by_type.get(group, kind);
        (t.places.iter().map(|i| &self.places[*i]), &t.tree)
    }

    /// The places of an object of `group`/`kind` (app names) by their
    /// position in that type's order, and their tree.
    pub fn type_places<'a>(&'a self, group: &str, kind: &str) -> TypePlacesOf<'a> {
        let t = self.by_type.get(group, kind);
        TypePlacesOf {
            all: &self.places,
            of_type: &t.places,
            tree: &t.tree,
        }
    }

    /// True when the reference-key heuristic must not descend into member
    /// `key` of an object of `kind`, found at `depth` (0 = the object's own
    /// members) under `parent` (the enclosing member's name).
    pub fn reference_keys_skip(kind: &str, parent: Option<&str>, depth: usize, key: &str) -> bool {
        (depth == 1 && parent == Some("metadata") && HEURISTIC_SKIP_METADATA.contains(&key))
            || (depth == 1
                && parent == Some("response")
                && REVIEW_KINDS.contains(&kind)
                && key == "auditAnnotations")
            || (depth == 0 && OPAQUE_DATA_KINDS.contains(&kind) && OPAQUE_DATA_KEYS.contains(&key))
    }
}

/// The resources and kinds of [`RESOURCE_KINDS`] in `group`, in the
/// table's order, gathered by group once: a built-in resource's look-up
/// compares its group with the ~17 groups, then its resource with the
/// group's few, where the ~45 rows were compared one by one (~0.22k
/// instructions a look-up, twice a request).
fn resource_kinds_of(group: &str) -> &'static [(&'static str, &'static str)] {
    type ByGroup = Vec<(&'static str, Vec<(&'static str, &'static str)>)>;
    static BY_GROUP: OnceLock<ByGroup> = OnceLock::new();
    let by_group = BY_GROUP.get_or_init(|| {
        let mut by_group: ByGroup = Vec::new();
        for &(g, r, k) in RESOURCE_KINDS {
            match by_group.iter_mut().find(|(x, _)| *x == g) {
                Some((_, rows)) => rows.push((r, k)),
                None => by_group.push((g, vec![(r, k)])),
            }
        }
        by_group
    });
    by_group
        .iter()
        .find(|(g, _)| *g == group)
        .map_or(&[], |(_, rows)| rows.as_slice())
}

/// The group and kind of each built-in place `metadata.name` of the
/// `QualifiedName` form ([`Catalog::names_carry_group`]), read from
/// [`BUILTIN`] once: every URL naming a built-in resource asked it, and the
/// whole table was scanned each time (~2.6k instructions a request for a
/// pod, docs/performance.md "One reading of a path's slashes").
fn qualified_names() -> &'static [(&'static str, &'static str)] {
    static NAMED: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    NAMED.get_or_init(|| {
        BUILTIN
            .iter()
            .filter(|(_, _, path, slot)| {
                *path == "metadata.name" && *slot == Slot::Value(Form::QualifiedName)
            })
            .flat_map(|(groups, kinds, _, _)| {
                groups
                    .iter()
                    .flat_map(move |g| kinds.iter().map(move |k| (*g, *k)))
            })
            .collect()
    })
}

/// True for the groups of [`RESOURCE_KINDS`] (a test holds the two
/// together): one `match`, its length compared first.
fn in_resource_kinds(group: &str) -> bool {
    matches!(
        group,
        "" | "admissionregistration.k8s.io"
            | "apiextensions.k8s.io"
            | "apiregistration.k8s.io"
            | "apps"
            | "authorization.k8s.io"
            | "autoscaling"
            | "batch"
            | "coordination.k8s.io"
            | "events.k8s.io"
            | "flowcontrol.apiserver.k8s.io"
            | "networking.k8s.io"
            | "node.k8s.io"
            | "rbac.authorization.k8s.io"
            | "resource.k8s.io"
            | "scheduling.k8s.io"
            | "storagemigration.k8s.io"
    )
}

#[cfg(test)]
mod tests;
