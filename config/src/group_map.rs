//! The one mapping function: every wire form a group takes, both directions.
//!
//! A [`GroupMap`] is built from validated rules (see [`crate::validate`]), so
//! it is a bijection over the groups it touches. Every method returns `None`
//! when nothing in its input is mapped, without allocating, so callers can
//! leave untouched bytes untouched.

use std::borrow::Cow;

use crate::metadata::MetadataMap;
use crate::object_names::ObjectNames;
use crate::short_names::{ShortForm, ShortNames};

pub use crate::rule::{Direction, Form, MapRule, Rule};

/// Maps API groups between the app's names and the cluster's, in every wire
/// form: `group`, `group/version`, `plural.group`, `version.group`,
/// `resource.group` inside text, reverse-DNS OpenAPI names and
/// `apis/group/version` paths.
///
/// ```
/// use regroup_config::{Direction, GroupMap, MapRule, Rule};
/// let map = GroupMap::new(vec![MapRule {
///     rule: Rule::Exact { from: "foo.example.io".into(), to: "foo.team-b.example.com".into() },
///     reference_keys: true,
/// }]).unwrap();
/// assert_eq!(map.map_api_version("foo.example.io/v1", Direction::ToCluster).as_deref(),
///            Some("foo.team-b.example.com/v1"));
/// assert_eq!(map.map_group("apps", Direction::ToCluster), None);
/// ```
#[derive(Clone, Debug)]
pub struct GroupMap {
    rules: Vec<MapRule>,
    /// Exact-rule lookup per direction: source name -> rule index.
    exact: [ExactNames; 2],
    /// Indexes of suffix rules.
    suffix: Vec<usize>,
    /// Cluster-scoped names renamed per copy (`names:`), if configured.
    names: Option<ObjectNames>,
    /// Label, annotation and finalizer keys renamed per copy (`metadata:`),
    /// if configured.
    metadata: Option<MetadataMap>,
    /// CRD short names and categories renamed per copy
    /// (`names.shortNamePrefix`), if configured.
    short_names: Option<ShortNames>,
}

impl GroupMap {
    /// Builds a map from rules, rejecting any set that is not a bijection or
    /// touches a built-in group (see [`crate::validate::rule_conflicts`]).
    pub fn new(rules: Vec<MapRule>) -> Result<GroupMap, Vec<crate::validate::RuleProblem>> {
        let problems = crate::validate::rule_conflicts(&rules);
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut exact: [ExactNames; 2] = Default::default();
        let mut suffix = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            match &r.rule {
                Rule::Exact { from, to } => {
                    exact[0].insert(from, i);
                    exact[1].insert(to, i);
                }
                Rule::Suffix { .. } => suffix.push(i),
            }
        }
        Ok(GroupMap {
            rules,
            exact,
            suffix,
            names: None,
            metadata: None,
            short_names: None,
        })
    }

    /// This map, also renaming the names of `names`' kinds.
    pub fn with_object_names(mut self, names: Option<ObjectNames>) -> GroupMap {
        self.names = names;
        self
    }

    /// This map, also renaming metadata keys by `metadata` (none when it
    /// holds no rule: bytes then stay exactly as without it).
    pub fn with_metadata(mut self, metadata: Option<MetadataMap>) -> GroupMap {
        self.metadata = metadata.filter(|m| !m.is_empty());
        self
    }

    /// This map, also renaming the renamed groups' CRD short names and
    /// categories by `short_names`.
    pub fn with_short_names(mut self, short_names: Option<ShortNames>) -> GroupMap {
        self.short_names = short_names;
        self
    }

    /// The per-copy short names and categories, if configured.
    pub fn short_names(&self) -> Option<&ShortNames> {
        self.short_names.as_ref()
    }

    /// The metadata rules, if any are configured.
    pub fn metadata(&self) -> Option<&MetadataMap> {
        self.metadata.as_ref()
    }

    /// The cluster-scoped names renamed per copy, if configured.
    pub fn object_names(&self) -> Option<&ObjectNames> {
        self.names.as_ref()
    }

    /// True when `name`, the name of an object of a listed kind (form
    /// [`Form::ObjectName`]) or of a CRD/APIService (`QualifiedName`),
    /// arriving in `dir`, must not be shown: toward the app, a CRD or
    /// APIService of a shadowed group, or an object of a listed kind that
    /// is neither this copy's nor kept. What the app sends is never hidden.
    pub fn hides_name(&self, form: Form, name: &str, dir: Direction) -> bool {
        if dir != Direction::ToApp {
            return false;
        }
        match form {
            Form::QualifiedName => name
                .split_once('.')
                .is_some_and(|(_, g)| self.is_shadowed(g, dir)),
            Form::ObjectName => self.names.as_ref().is_some_and(|n| n.hides(name)),
            Form::FixedName => self.names.as_ref().is_some_and(|n| n.hides_fixed(name)),
            _ => false,
        }
    }

    /// The rules, in configuration order.
    pub fn rules(&self) -> &[MapRule] {
        &self.rules
    }

    /// The rule that maps `group` in `dir`, if any.
    pub fn rule_for(&self, group: &str, dir: Direction) -> Option<&MapRule> {
        if let Some(i) = self.exact[dir.index()].get(group) {
            return Some(&self.rules[i]);
        }
        self.suffix
            .iter()
            .map(|&i| &self.rules[i])
            .find(|r| r.rule.covers(group, dir))
    }

    /// Maps `value`, read as `form`. `None`: nothing in it is mapped.
    pub fn map(&self, form: Form, value: &str, dir: Direction) -> Option<String> {
        match form {
            Form::Group => self.map_group(value, dir),
            Form::ApiVersion => self.map_api_version(value, dir),
            Form::QualifiedName => self.map_qualified_name(value, dir),
            Form::Text => self.map_text(value, dir),
            Form::ReverseDns => self.map_reverse_dns(value, dir),
            Form::ResourceName if value.contains('/') => self.map_signer_name(value, dir),
            Form::ResourceName => self.map(Form::FixedName, value, dir),
            Form::ApiPath => self.map_api_path(value, dir),
            Form::FieldSelector => self.map_field_selector(value, None, dir),
            Form::GroupKinds => self.map_group_kinds(value, dir),
            Form::ObjectCount => self.map_object_count(value, dir),
            Form::ObjectName => {
                let n = self.names.as_ref()?;
                match dir {
                    Direction::ToCluster => n.to_cluster(value),
                    Direction::ToApp => n.to_app(value),
                }
            }
            Form::FixedName => {
                let n = self.names.as_ref()?;
                match dir {
                    Direction::ToCluster => n.fixed_to_cluster(value),
                    Direction::ToApp => n.fixed_to_app(value),
                }
            }
            // The suffix case is refused by the codecs before they map;
            // an empty one (protobuf's default) asks for nothing.
            Form::GenerateName if value.is_empty() => None,
            Form::GenerateName => {
                let n = self.names.as_ref()?;
                match dir {
                    Direction::ToCluster => n.generate_name_to_cluster(value).ok(),
                    Direction::ToApp => n.generate_name_to_app(value),
                }
            }
            Form::MetadataKey => self.metadata.as_ref()?.map_key(value, dir),
            // Codecs that must refuse a selector they can't parse call
            // `map_label_selector` themselves.
            Form::LabelSelector => self.map_label_selector(value, dir).ok().flatten(),
            Form::Literal => self.map_literal(value, dir),
            // Likewise `map_cel`.
            Form::Cel => self.map_cel(value, dir).ok().flatten(),
            Form::ShortName | Form::Category => {
                let s = self.short_names.as_ref()?;
                let which = if form == Form::ShortName {
                    ShortForm::ShortName
                } else {
                    ShortForm::Category
                };
                match dir {
                    Direction::ToCluster => s.to_cluster(which, value),
                    Direction::ToApp => s.to_app(which, value),
                }
            }
        }
    }

    /// `value` renamed when it is exactly a mapped group, a `group/version`
    /// of one, or a metadata key the `metadata:` rules rename; `None`
    /// otherwise (a longer or shorter text that merely contains one too).
    pub fn map_literal(&self, value: &str, dir: Direction) -> Option<String> {
        if let Some((_, version)) = value.split_once('/') {
            // `group/` (a prefix tested with `startsWith`) is no apiVersion,
            // nor a key.
            if version.is_empty() {
                return None;
            }
            if is_version_label(version) {
                if let Some(v) = self.map_api_version(value, dir) {
                    return Some(v);
                }
            }
            return self.metadata.as_ref()?.map_key(value, dir);
        }
        if crate::dns::subdomain_problem(value).is_some() {
            return None;
        }
        self.map_group(value, dir)
    }

    /// A CEL expression's string literals renamed by
    /// [`map_literal`](Self::map_literal). `Ok(None)`: unchanged (an
    /// expression naming nothing mapped is not even parsed). An error says
    /// why an expression that names something mapped is not CEL.
    pub fn map_cel(
        &self,
        expr: &str,
        dir: Direction,
    ) -> Result<Option<String>, crate::cel::CelError> {
        if !self.needles(dir).iter().any(|n| expr.contains(n)) {
            return Ok(None);
        }
        crate::cel::rename_literals(expr, |l| self.map_literal(l, dir))
    }

    /// The names inside a CEL expression that [`map_cel`](Self::map_cel)
    /// leaves (they are not a whole string literal): either side's, for a
    /// warning. Empty when the expression is not CEL (the codecs refuse
    /// it) or names nothing mapped.
    pub fn cel_mentions(&self, expr: &str) -> Vec<&str> {
        let needles: Vec<&str> = [Direction::ToCluster, Direction::ToApp]
            .iter()
            .flat_map(|d| self.needles(*d))
            .collect();
        if !needles.iter().any(|n| expr.contains(n)) {
            return Vec::new();
        }
        let Ok(literals) = crate::cel::string_literals(expr) else {
            return Vec::new();
        };
        // The expression with every literal that is exactly a name blanked.
        let mut rest = String::with_capacity(expr.len());
        let mut at = 0;
        for l in literals {
            let whole = [Direction::ToCluster, Direction::ToApp]
                .iter()
                .any(|d| self.map_literal(&l.value, *d).is_some());
            if whole {
                rest.push_str(&expr[at..l.start]);
                rest.push_str("''");
                at = l.end;
            }
        }
        rest.push_str(&expr[at..]);
        let mut hits: Vec<&str> = needles.into_iter().filter(|n| rest.contains(n)).collect();
        // The longest first: a suffix rule's name inside a longer one is named once.
        hits.sort_by_key(|n| std::cmp::Reverse(n.len()));
        hits.dedup();
        hits
    }

    /// A label selector's keys and values renamed by the metadata rules.
    /// `Ok(None)`: unchanged (also when no metadata rule is configured:
    /// the selector is then not even parsed). An error says why a selector
    /// that must be renamed can't be parsed.
    pub fn map_label_selector(
        &self,
        selector: &str,
        dir: Direction,
    ) -> Result<Option<String>, crate::label_selector::LabelSelectorError> {
        match &self.metadata {
            Some(m) => crate::metadata::map_label_selector(selector, m, dir),
            None => Ok(None),
        }
    }

    /// Maps the values of a field selector's requirements on keys ending
    /// in `.apiVersion` (as `group/version`) or `.apiGroup` (as a group);
    /// with `names`, also `metadata.name`, in that form (`QualifiedName` on
    /// CRDs or APIServices, `ObjectName` on a kind listed in `names:`).
    /// Every other byte is kept.
    pub fn map_field_selector(
        &self,
        selector: &str,
        names: Option<Form>,
        dir: Direction,
    ) -> Option<String> {
        let mut changed = false;
        let reqs: Vec<String> = selector
            .split(',')
            .map(|req| {
                let op_at = req.find(['=', '!']).unwrap_or(req.len());
                let (field, rest) = req.split_at(op_at);
                let op_len = rest.len() - rest.trim_start_matches(['=', '!']).len();
                let (op, value) = rest.split_at(op_len);
                let key = field.trim();
                let mapped = if key.ends_with(".apiVersion") {
                    self.map_api_version(value, dir)
                } else if key.ends_with(".apiGroup") {
                    self.map_group(value, dir)
                } else if let (Some(form), "metadata.name") = (names, key) {
                    self.map(form, value, dir)
                } else {
                    None
                };
                match mapped {
                    Some(m) => {
                        changed = true;
                        format!("{field}{op}{m}")
                    }
                    None => req.to_owned(),
                }
            })
            .collect();
        changed.then(|| reqs.join(","))
    }

    /// Maps a comma-separated `Kind.group` list; bare core kinds and
    /// unmapped groups keep their bytes.
    pub fn map_group_kinds(&self, list: &str, dir: Direction) -> Option<String> {
        let mut changed = false;
        let items: Vec<String> = list
            .split(',')
            .map(|item| match self.map_qualified_name(item, dir) {
                Some(m) => {
                    changed = true;
                    m
                }
                None => item.to_owned(),
            })
            .collect();
        changed.then(|| items.join(","))
    }

    /// Maps a ResourceQuota object-count key, `count/<resource>.<group>`.
    pub fn map_object_count(&self, key: &str, dir: Direction) -> Option<String> {
        let name = key.strip_prefix("count/")?;
        Some(format!("count/{}", self.map_qualified_name(name, dir)?))
    }

    /// Maps a bare group name. `None`: not mapped (leave it as it is).
    pub fn map_group(&self, group: &str, dir: Direction) -> Option<String> {
        // Two bytes more for a JSON codec's quotes.
        self.rule_for(group, dir)
            .map(|r| r.rule.apply(group, dir, 2))
    }

    /// [`map_group`](Self::map_group) without allocating when an exact
    /// rule maps it (its target is borrowed from the rule).
    pub fn map_group_cow<'a>(&'a self, group: &str, dir: Direction) -> Option<Cow<'a, str>> {
        let rule = self.rule_for(group, dir)?;
        Some(match &rule.rule {
            Rule::Exact { .. } => Cow::Borrowed(rule.rule.ends(dir).1),
            Rule::Suffix { .. } => Cow::Owned(rule.rule.apply(group, dir, 0)),
        })
    }

    /// Like [`map_group`](Self::map_group), but only through rules that allow
    /// the `apiGroup`/`apiVersion` reference-key heuristic.
    pub fn map_group_by_reference_key(&self, group: &str, dir: Direction) -> Option<String> {
        self.rule_for(group, dir)
            .filter(|r| r.reference_keys)
            .map(|r| r.rule.apply(group, dir, 0))
    }

    /// Maps `group/version`. A bare `version` (the core group) is never mapped.
    pub fn map_api_version(&self, api_version: &str, dir: Direction) -> Option<String> {
        self.map_api_version_with(api_version, dir, false)
    }

    /// [`map_api_version`](Self::map_api_version) through rules that allow
    /// the reference-key heuristic.
    pub fn map_api_version_by_reference_key(
        &self,
        api_version: &str,
        dir: Direction,
    ) -> Option<String> {
        self.map_api_version_with(api_version, dir, true)
    }

    fn map_api_version_with(
        &self,
        api_version: &str,
        dir: Direction,
        reference_keys_only: bool,
    ) -> Option<String> {
        let (rule, group, version) =
            self.api_version_rule(api_version, dir, reference_keys_only)?;
        // One allocation, and no formatting machinery on the per-object
        // path; two bytes more for a JSON codec's quotes.
        let mut mapped = rule.rule.apply(group, dir, 1 + version.len() + 2);
        mapped.push('/');
        mapped.push_str(version);
        Some(mapped)
    }

    /// [`map_api_version`](Self::map_api_version) appended to `out` (a
    /// codec's buffer of replacement texts: no `String` of its own).
    /// False, and `out` as it was: not mapped.
    pub fn map_api_version_into(
        &self,
        api_version: &str,
        dir: Direction,
        out: &mut String,
    ) -> bool {
        let Some((rule, group, version)) = self.api_version_rule(api_version, dir, false) else {
            return false;
        };
        rule.rule.apply_into(group, dir, out);
        out.push('/');
        out.push_str(version);
        true
    }

    /// The rule that maps `group/version`, and the two halves.
    fn api_version_rule<'v>(
        &self,
        api_version: &'v str,
        dir: Direction,
        reference_keys_only: bool,
    ) -> Option<(&MapRule, &'v str, &'v str)> {
        // An exact rule's name followed by `/` is compared in place (group
        // names hold no `/`, so that is where `split_once` would split);
        // with no suffix rule, nothing else can match, and the text is not
        // searched for its `/` at all.
        let (rule, slash) = match self.exact[dir.index()].before_slash(api_version) {
            Some((i, slash)) => (&self.rules[i], slash),
            None if self.suffix.is_empty() && self.exact[dir.index()].many.is_empty() => {
                return None
            }
            None => {
                let slash = api_version.bytes().position(|b| b == b'/')?;
                (self.rule_for(&api_version[..slash], dir)?, slash)
            }
        };
        if reference_keys_only && !rule.reference_keys {
            return None;
        }
        Some((rule, &api_version[..slash], &api_version[slash + 1..]))
    }

    /// Maps a name of the form `first.group`, where `first` is one DNS label:
    /// CRD names (`plural.group`) and APIService names (`version.group`).
    pub fn map_qualified_name(&self, name: &str, dir: Direction) -> Option<String> {
        let (first, group) = name.split_once('.')?;
        let mapped = self.map_group(group, dir)?;
        Some(format!("{first}.{mapped}"))
    }

    /// Maps a CRD name, `plural.group`.
    pub fn map_plural_group(&self, name: &str, dir: Direction) -> Option<String> {
        self.map_qualified_name(name, dir)
    }

    /// Maps an APIService name, `version.group`.
    pub fn map_version_group(&self, name: &str, dir: Direction) -> Option<String> {
        self.map_qualified_name(name, dir)
    }

    /// Maps group references inside free text such as a `Status` message:
    /// a token `resource.group` / `Kind.group` or a token that is exactly a
    /// mapped group (`in group "foo.example.io"`). Tokens are maximal runs of
    /// `[A-Za-z0-9.-]`; anything else in the text is kept byte for byte.
    pub fn map_text(&self, text: &str, dir: Direction) -> Option<String> {
        match self.map_text_groups(text, dir) {
            Some(t) => Some(self.map_quoted_names(&t, dir).unwrap_or(t)),
            None => self.map_quoted_names(text, dir),
        }
    }

    /// Toward the app, with `names:`: each double-quoted name in `text`
    /// that is this copy's (`"team1-foo-viewer"`, as kube-apiserver quotes
    /// an object's name in `clusterroles.rbac.authorization.k8s.io
    /// "team1-foo-viewer" not found`) loses its mark. Toward the cluster
    /// nothing can tell the app's names from other words.
    fn map_quoted_names(&self, text: &str, dir: Direction) -> Option<String> {
        let names = self.names.as_ref().filter(|_| dir == Direction::ToApp)?;
        let mut out: Option<String> = None;
        let mut copied = 0;
        let mut rest = 0;
        while let Some(open) = text[rest..].find('"').map(|i| rest + i) {
            let Some(close) = text[open + 1..].find('"').map(|i| open + 1 + i) else {
                break;
            };
            let quoted = &text[open + 1..close];
            if let Some(app) = names.to_app(quoted).or_else(|| names.fixed_to_app(quoted)) {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                o.push_str(&text[copied..open + 1]);
                o.push_str(&app);
                copied = close;
            }
            rest = close + 1;
        }
        let mut o = out?;
        o.push_str(&text[copied..]);
        Some(o)
    }

    fn map_text_groups(&self, text: &str, dir: Direction) -> Option<String> {
        if !self.could_occur(text, dir) {
            return None;
        }
        let mut out: Option<String> = None;
        let mut copied = 0;
        let bytes = text.as_bytes();
        let is_tok = |b: u8| b.is_ascii_alphanumeric() || b == b'.' || b == b'-';
        let mut i = 0;
        while i < bytes.len() {
            if !is_tok(bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && is_tok(bytes[i]) {
                i += 1;
            }
            let token = text[start..i].trim_end_matches('.');
            if let Some((offset, mapped)) = self.map_token(token, dir) {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
                o.push_str(&text[copied..start + offset]);
                o.push_str(&mapped);
                copied = start + token.len();
            }
        }
        let mut o = out?;
        o.push_str(&text[copied..]);
        Some(o)
    }

    /// In a text token, the byte offset and mapping of the group it names.
    fn map_token(&self, token: &str, dir: Direction) -> Option<(usize, String)> {
        if let Some(m) = self.map_group(token, dir) {
            return Some((0, m));
        }
        // `resource.group`: try each dot from the left, longest group first.
        let mut from = 0;
        while let Some(p) = token[from..].find('.') {
            let at = from + p + 1;
            if let Some(m) = self.map_group(&token[at..], dir) {
                return Some((at, m));
            }
            from = at;
        }
        None
    }

    /// Maps an OpenAPI definition name in reverse-DNS form:
    /// `io.k8s.samplecontroller.v1alpha1.Foo` (group `samplecontroller.k8s.io`)
    /// <-> `com.example.team1.samplecontroller.v1alpha1.Foo`. The group is the
    /// labels before the first version-shaped label (`v1`, `v2beta1`, ...).
    pub fn map_reverse_dns(&self, name: &str, dir: Direction) -> Option<String> {
        let mut end = None;
        let mut pos = 0;
        for label in name.split('.') {
            if pos > 0 && is_version_label(label) {
                end = Some(pos - 1);
                break;
            }
            pos += label.len() + 1;
        }
        let end = end?;
        let reversed_group = &name[..end];
        let group = reverse_labels(reversed_group);
        let mapped = self.map_group(&group, dir)?;
        Some(format!("{}{}", reverse_labels(&mapped), &name[end..]))
    }

    /// Maps a signer name `DOMAIN/NAME` whose DOMAIN is a group or ends in
    /// `.GROUP` (the longest such group): `issuers.cert-manager.io/ns.ca`
    /// -> `issuers.cert-manager.team-b.example.com/ns.ca`.
    pub fn map_signer_name(&self, value: &str, dir: Direction) -> Option<String> {
        let (domain, rest) = value.split_once('/')?;
        let mut at = 0;
        loop {
            if let Some(mapped) = self.map_group(&domain[at..], dir) {
                return Some(format!("{}{mapped}/{rest}", &domain[..at]));
            }
            at += domain[at..].find('.')? + 1;
        }
    }

    /// Maps a path whose group follows `apis/`: `/apis/g/v/...`,
    /// `apis/g/v` (OpenAPI v3 index keys) and `/openapi/v3/apis/g/v`.
    pub fn map_api_path(&self, path: &str, dir: Direction) -> Option<String> {
        let lead = if path.starts_with('/') { 1 } else { 0 };
        let mut at = lead;
        if path[at..].starts_with("openapi/v3/") {
            at += "openapi/v3/".len();
        }
        let rest = path[at..].strip_prefix("apis/")?;
        at += "apis/".len();
        let group_len = rest.find(['/', '?']).unwrap_or(rest.len());
        let mapped = self.map_group(&rest[..group_len], dir)?;
        Some(format!(
            "{}{}{}",
            &path[..at],
            mapped,
            &path[at + group_len..]
        ))
    }

    /// True when `group`, seen arriving in `dir`, must be hidden: it already
    /// is one of the names the other side uses. For the app (`ToApp`), an
    /// upstream group named like an original is shadowed, because that name
    /// now means the renamed group.
    pub fn is_shadowed(&self, group: &str, dir: Direction) -> bool {
        self.rule_for(group, dir.flip()).is_some()
    }

    /// The strings whose absence from a byte buffer proves nothing in it is
    /// mapped in `dir` (the bare source groups and suffixes). Text that might
    /// hide one behind a JSON `\u` escape must be checked separately.
    pub fn needles(&self, dir: Direction) -> Vec<&str> {
        let mut v: Vec<&str> = self.rules.iter().map(|r| r.rule.ends(dir).0).collect();
        if let Some(m) = &self.metadata {
            v.extend(m.needles());
        }
        v
    }

    /// Cheap pre-check: could `text` contain a name mapped in `dir`?
    fn could_occur(&self, text: &str, dir: Direction) -> bool {
        self.rules.iter().any(|r| text.contains(r.rule.ends(dir).0))
    }
}

/// The exact rules' source names of one direction, looked up several
/// times per object. A name whose length no rule's name has is answered
/// without reading it; a few names are compared one by one (cheaper than
/// hashing a 30-byte group); many go through a hash map, whose keys are
/// the configuration's (a peer's names are only looked up, never inserted),
/// so a fast hash (foldhash) is safe.
#[derive(Clone, Debug, Default)]
struct ExactNames {
    /// Bit `n` set: some name is `n` bytes long (bit 127: 127 or more).
    lengths: u128,
    /// Each name and its rule's index, in configuration order.
    few: Vec<(String, usize)>,
    /// Past [`ExactNames::FEW`] names, the same as a map.
    many: foldhash::HashMap<String, usize>,
}

impl ExactNames {
    /// Up to this many names are compared one by one.
    const FEW: usize = 8;

    fn length_bit(len: usize) -> u128 {
        1 << len.min(127)
    }

    fn insert(&mut self, name: &str, rule: usize) {
        self.lengths |= Self::length_bit(name.len());
        if !self.many.is_empty() || self.few.len() == Self::FEW {
            self.many.extend(self.few.drain(..));
            self.many.insert(name.to_owned(), rule);
        } else {
            self.few.push((name.to_owned(), rule));
        }
    }

    /// The rule of the name `text` starts with when a `/` follows it, and
    /// where that `/` is; only while the names are few (else `None`).
    fn before_slash(&self, text: &str) -> Option<(usize, usize)> {
        let t = text.as_bytes();
        self.few
            .iter()
            .find(|(n, _)| t.get(n.len()) == Some(&b'/') && t.starts_with(n.as_bytes()))
            .map(|(n, i)| (*i, n.len()))
    }

    fn get(&self, name: &str) -> Option<usize> {
        if self.lengths & Self::length_bit(name.len()) == 0 {
            return None;
        }
        if self.many.is_empty() {
            return self.few.iter().find(|(n, _)| n == name).map(|(_, i)| *i);
        }
        self.many.get(name).copied()
    }
}

/// `v1`, `v1alpha1`, `v2beta3`: Kubernetes version labels.
pub fn is_version_label(label: &str) -> bool {
    let Some(rest) = label.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || rest.starts_with('0') {
        return false;
    }
    let tail = &rest[digits..];
    if tail.is_empty() {
        return true;
    }
    let n = tail
        .strip_prefix("alpha")
        .or_else(|| tail.strip_prefix("beta"));
    matches!(n, Some(d) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0'))
}

fn reverse_labels(s: &str) -> String {
    let mut labels: Vec<&str> = s.split('.').collect();
    labels.reverse();
    labels.join(".")
}

#[cfg(test)]
mod tests;
