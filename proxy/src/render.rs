//! `regroup render`: the same renaming, offline, on manifests.
//!
//! Multi-document YAML (or a JSON stream) in, renamed YAML out, in document
//! order, so an admin can `regroup render -c rules.yaml -f crds.yaml |
//! kubectl apply -f -`. Either the whole output or an error: never part of it.

use regroup_config::{Direction, Settings};
use serde_json::Value as Json;
use serde_saphyr::Spanned;

use crate::kube::Wire;
use crate::rewrite::{Catalog, Context, Engine};

mod cel;
pub mod enum_fields;
pub mod shared;

/// Why a manifest stream could not be rendered. The message names the
/// document (1-based, in input order) and its line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RenderError(pub String);

/// A parsed input document and the line it starts on.
struct Doc {
    line: usize,
    value: Json,
}

/// What renaming in one direction needs, built once from the settings (the
/// engine's catalog and automata of mapped names cost far more than
/// renaming a manifest): [`render`] and [`render_values`] build one per
/// call; `Renderer` keeps it for many.
pub struct Renderer<'s> {
    settings: std::marker::PhantomData<&'s Settings>,
    /// The engine of the proxy, built on the settings' map with its
    /// `names:` idempotent (manifests may be rendered twice: `inject` on its
    /// own output).
    engine: Engine,
    dir: Direction,
}

impl<'s> Renderer<'s> {
    pub fn new(settings: &'s Settings, dir: Direction) -> Self {
        Renderer::with_names(settings, dir, settings.map.object_names().cloned())
    }

    /// A renderer for these manifests (`inputs`, every file of the run):
    /// besides the configuration's names and fields, the objects they put
    /// into the namespaces the app shares with other copies get the copy's
    /// mark, and the fields their CRDs' enums say hold a group are renamed
    /// (see [`Derived`]). Also returns what was derived.
    pub fn for_manifests(
        settings: &'s Settings,
        dir: Direction,
        inputs: &[&str],
    ) -> Result<(Self, Derived), RenderError> {
        let derived = derive(settings, inputs)?;
        let names = derived
            .names
            .clone()
            .or_else(|| settings.map.object_names().cloned());
        let r = Renderer::with(settings, dir, names, &derived.fields);
        Ok((r, derived))
    }

    fn with_names(
        settings: &'s Settings,
        dir: Direction,
        names: Option<regroup_config::object_names::ObjectNames>,
    ) -> Self {
        Renderer::with(settings, dir, names, &[])
    }

    fn with(
        settings: &'s Settings,
        dir: Direction,
        names: Option<regroup_config::object_names::ObjectNames>,
        more_fields: &[enum_fields::EnumField],
    ) -> Self {
        let names = names.map(|n| n.for_manifests());
        let metadata = settings.map.metadata().cloned().map(|m| m.for_manifests());
        let map = settings
            .map
            .clone()
            .with_object_names(names)
            .with_metadata(metadata);
        let mut fields = settings.fields.clone();
        for f in more_fields {
            let Ok(path) = regroup_config::field_path::FieldPath::parse(&f.path) else {
                continue;
            };
            let dup = fields
                .iter()
                .any(|c| c.group == f.group && c.kind == f.kind && c.path == path);
            if !dup {
                fields.push(regroup_config::load::CustomField {
                    group: f.group.clone(),
                    kind: f.kind.clone(),
                    path,
                    form: regroup_config::rule::Form::Group,
                });
            }
        }
        let catalog = Catalog::for_map(&fields, &map);
        Renderer {
            settings: std::marker::PhantomData,
            engine: Engine::new(map, catalog),
            dir,
        }
    }

    /// See [`render`].
    pub fn render(&self, input: &str) -> Result<String, RenderError> {
        // Every document is checked (and its errors named) the same way.
        let values = self.render_values(input)?;
        if looks_like_json(input) {
            return to_yaml(&values);
        }
        let yaml = input.as_bytes();
        match self
            .engine
            .body(self.dir, Wire::Yaml, Context::default(), yaml)
        {
            Ok(Some(out)) => String::from_utf8(out)
                .map_err(|e| RenderError(format!("could not write YAML: {e}"))),
            Ok(None) => Ok(input.to_owned()),
            Err(e) => Err(RenderError(format!("input: {e}"))),
        }
    }

    /// See [`render_values`].
    pub fn render_values(&self, input: &str) -> Result<Vec<Json>, RenderError> {
        let docs = if looks_like_json(input) {
            parse_json(input)?
        } else {
            parse_yaml(input)?
        };
        let mut out = Vec::with_capacity(docs.len());
        for (i, mut doc) in docs.into_iter().enumerate() {
            let at = format!("document {} (line {})", i + 1, doc.line);
            let Some(obj) = doc.value.as_object() else {
                return Err(RenderError(format!(
                    "{at}: expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
                    kind_of(&doc.value)
                )));
            };
            if !obj.contains_key("kind") || !obj.contains_key("apiVersion") {
                return Err(RenderError(format!(
                    "{at}: not a Kubernetes object: `apiVersion` and `kind` are required"
                )));
            }
            self.engine
                .value(self.dir, Context::default(), &mut doc.value)
                .map_err(|e| RenderError(format!("{at}: {e}")))?;
            out.push(doc.value);
        }
        Ok(out)
    }
}

/// What the manifests of a run add to the configuration: the fixed names
/// of what they put into the shared namespaces ([`shared`]) and the fields
/// their CRDs' enums say hold a group ([`enum_fields`]).
#[derive(Debug, Default)]
pub struct Derived {
    /// The configuration's `names:` with the shared namespaces' names.
    pub names: Option<regroup_config::object_names::ObjectNames>,
    /// What was found in the shared namespaces.
    pub shared: shared::Shared,
    /// The fields found in CRD enums (not already configured).
    pub fields: Vec<enum_fields::EnumField>,
}

/// Every object of `docs`, the items of a `List` in its place.
pub(crate) fn each_object(docs: &[Json]) -> Vec<&Json> {
    let mut out = Vec::new();
    let mut stack: Vec<&Json> = docs.iter().rev().collect();
    while let Some(d) = stack.pop() {
        let is_list = d
            .get("kind")
            .and_then(Json::as_str)
            .is_some_and(|k| k.ends_with("List"));
        match d.get("items").and_then(Json::as_array) {
            Some(items) if is_list => stack.extend(items.iter().rev()),
            _ => out.push(d),
        }
    }
    out
}

/// One line per derived name and field, for standard error.
pub fn derived_lines(d: &Derived) -> Vec<String> {
    let mut out: Vec<String> = d
        .shared
        .found
        .iter()
        .map(|l| format!("renamed per copy in a shared namespace (names.sharedNamespaces): {l}"))
        .collect();
    out.extend(d.fields.iter().map(|f| {
        format!(
            "a field whose CRD enum lists a renamed group, renamed in objects too: {} {}.{}",
            f.path, f.kind, f.group
        )
    }));
    out
}

/// See [`Derived`].
pub fn derive(settings: &Settings, inputs: &[&str]) -> Result<Derived, RenderError> {
    let mut docs = Vec::new();
    for input in inputs {
        let parsed = if looks_like_json(input) {
            parse_json(input)?
        } else {
            parse_yaml(input)?
        };
        docs.extend(parsed.into_iter().map(|d| d.value));
    }
    let fields = enum_fields::find(&docs, &settings.map)
        .into_iter()
        .filter(|f| {
            !settings
                .fields
                .iter()
                .any(|c| c.group == f.group && c.kind == f.kind && c.path.to_string() == f.path)
        })
        .collect();
    let Some(n) = settings.map.object_names().cloned() else {
        return Ok(Derived {
            fields,
            ..Derived::default()
        });
    };
    let shared = shared::find(&docs, &settings.shared_namespaces(), &n);
    let n = n
        .with_more_fixed(&shared.kinds, &shared.names)
        .map_err(|ps| {
            RenderError(format!(
                "the names found in the shared namespaces can't be renamed: {}",
                ps.iter()
                    .map(|p| p.0.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
        })?;
    Ok(Derived {
        names: Some(n),
        shared,
        fields,
    })
}

/// Renames every group in `input` (YAML documents or JSON values) in `dir`
/// and returns the documents as YAML. YAML is edited in place: only the
/// group-bearing scalars change, every other byte (comments, quoting, flow
/// style, `0644`, `y`) stays as written. JSON input comes out as YAML.
pub fn render(input: &str, settings: &Settings, dir: Direction) -> Result<String, RenderError> {
    Renderer::new(settings, dir).render(input)
}

/// [`render`] without the YAML writing: the renamed documents, in input
/// order (`regroup inject` works on them before writing).
pub fn render_values(
    input: &str,
    settings: &Settings,
    dir: Direction,
) -> Result<Vec<Json>, RenderError> {
    Renderer::new(settings, dir).render_values(input)
}

/// Warnings about `input` (YAML documents or JSON values) that renaming
/// can't fix: CEL expressions (admission policies, webhook
/// `matchConditions`, CRD `x-kubernetes-validations`) that name a mapped
/// group, each as `document N (line L): KIND NAME: PATH names GROUP ...`.
pub fn warnings(input: &str, settings: &Settings) -> Result<Vec<String>, RenderError> {
    let docs = if looks_like_json(input) {
        parse_json(input)?
    } else {
        parse_yaml(input)?
    };
    Ok(docs
        .iter()
        .enumerate()
        .flat_map(|(i, d)| {
            cel::warnings(&d.value, settings)
                .into_iter()
                .map(move |w| format!("document {} (line {}): {w}", i + 1, d.line))
        })
        .collect())
}

/// Documents as multi-document YAML (empty input, empty output).
pub fn to_yaml(docs: &[Json]) -> Result<String, RenderError> {
    if docs.is_empty() {
        return Ok(String::new());
    }
    serde_saphyr::to_string_multiple(docs)
        .map_err(|e| RenderError(format!("could not write YAML: {e}")))
}

/// How kubectl and Helm read YAML (YAML 1.1 through go-yaml): `0644` is
/// octal, 420, as a pod's `defaultMode` means it. Read as YAML 1.2 it
/// would be 644, and written back a mode the apiserver refuses.
pub fn kube_yaml() -> serde_saphyr::Options {
    let mut o = serde_saphyr::Options::default();
    o.legacy_octal_numbers = true;
    o
}

fn looks_like_json(input: &str) -> bool {
    input.trim_start().starts_with(['{', '['])
}

fn kind_of(v: &Json) -> &'static str {
    match v {
        Json::Null => "an empty value",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "a mapping",
    }
}

fn parse_yaml(input: &str) -> Result<Vec<Doc>, RenderError> {
    match serde_saphyr::from_multiple_with_options::<Spanned<Json>>(input, kube_yaml()) {
        Ok(docs) => Ok(docs
            .into_iter()
            .filter(|d| !d.value.is_null())
            .map(|d| Doc {
                line: d.referenced.line() as usize,
                value: d.value,
            })
            .collect()),
        Err(e) => {
            let line = e.location().map(|l| l.line() as usize);
            let at = match line {
                Some(l) => format!("document {} (line {l})", yaml_document_at(input, l)),
                None => "input".to_string(),
            };
            Err(RenderError(format!("{at}: invalid YAML: {e}")))
        }
    }
}

/// The 1-based index of the YAML document containing `line`, counting `---`
/// separators (a leading one does not start a second document).
fn yaml_document_at(input: &str, line: usize) -> usize {
    let mut doc = 1;
    let mut content_seen = false;
    for l in input.lines().take(line.saturating_sub(1)) {
        if l.starts_with("---") {
            if content_seen {
                doc += 1;
            }
            content_seen = false;
        } else if !l.trim().is_empty() && !l.trim_start().starts_with('#') {
            content_seen = true;
        }
    }
    doc
}

fn parse_json(input: &str) -> Result<Vec<Doc>, RenderError> {
    let mut docs = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(input).into_iter::<Json>();
    loop {
        let start = stream.byte_offset();
        match stream.next() {
            None => break,
            Some(Ok(Json::Array(items))) => {
                // A top-level JSON array: each element is a document.
                let line = line_of(input, start);
                docs.extend(items.into_iter().map(|value| Doc { line, value }));
            }
            Some(Ok(value)) => docs.push(Doc {
                line: line_of(input, start),
                value,
            }),
            Some(Err(e)) => {
                return Err(RenderError(format!(
                    "document {} (line {}): invalid JSON: {e}",
                    docs.len() + 1,
                    e.line()
                )))
            }
        }
    }
    Ok(docs)
}

fn line_of(input: &str, offset: usize) -> usize {
    let skipped = input[offset..].len() - input[offset..].trim_start().len();
    input[..offset + skipped].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_index_counts_separators_after_content() {
        let y = "---\na: 1\n---\n# c\nb: 2\n---\nc: [\n";
        assert_eq!(yaml_document_at(y, 2), 1);
        assert_eq!(yaml_document_at(y, 5), 2);
        assert_eq!(yaml_document_at(y, 7), 3);
    }
}
