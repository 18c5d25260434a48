//! From YAML text to validated [`Settings`], with every error naming its line.

use std::fmt;
use std::net::SocketAddr;

use crate::dns::subdomain_problem;
use crate::field_path::FieldPath;
use crate::group_map::{Direction, Form, GroupMap, MapRule, Rule};
use crate::object_names::ObjectNames;
use crate::schema::{ConfigFile, FieldForm, Front, Listeners, RuleSpec};
use crate::short_names::ShortNames;
use crate::validate::describe;

/// A configured app-specific field: in objects of `group`/`kind` (app names),
/// the value at `path` carries a group in `form`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomField {
    /// The kind's group, as the app knows it.
    pub group: String,
    /// The kind.
    pub kind: String,
    /// Where the value is.
    pub path: FieldPath,
    /// How it names a group.
    pub form: Form,
}

/// A validated configuration.
#[derive(Debug)]
pub struct Settings {
    /// The rename bijection.
    pub map: GroupMap,
    /// App-specific fields (the config's `fields`).
    pub fields: Vec<CustomField>,
    /// Sizes and timeouts (`limits:`, defaults filled in).
    pub limits: crate::Limits,
    /// Host names accepted on loopback listeners: lower case, IPv6 without
    /// brackets (`listeners.allowedHosts`, normalized).
    pub allowed_hosts: Vec<String>,
    /// The rest of the file, as written (already checked).
    pub file: ConfigFile,
}

/// Why a configuration was refused: every problem found, each with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// One message per problem, `line N: ...` where a line is known.
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(p)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Parses and validates a configuration file's text.
pub fn load(text: &str) -> Result<Settings, ConfigError> {
    let mut file: ConfigFile = if text.trim().is_empty() {
        ConfigFile::default()
    } else {
        serde_saphyr::from_str(text).map_err(|e| ConfigError {
            problems: vec![format!("invalid configuration: {e}")],
        })?
    };
    let mut problems = Vec::new();

    let lines: Vec<u64> = file.rules.iter().map(|r| r.referenced.line()).collect();
    let mut rules = Vec::new();
    for (i, spec) in file.rules.iter().enumerate() {
        match rule_from_spec(&spec.value) {
            Ok(r) => rules.push(r),
            Err(msg) => problems.push(format!("line {}: rule {}: {msg}", lines[i], i + 1)),
        }
    }
    // Publish mode may publish the central cluster's groups as they are.
    if file.rules.is_empty() && file.publish.is_none() {
        problems.push("no rules: a configuration needs at least one rule under `rules:`".into());
    }
    let map = if problems.is_empty() {
        match GroupMap::new(rules) {
            Ok(m) => Some(m),
            Err(errs) => {
                for e in errs {
                    let at: Vec<String> = e.rules.iter().map(|&i| lines[i].to_string()).collect();
                    let word = if at.len() > 1 { "lines" } else { "line" };
                    problems.push(format!("{word} {}: {}", at.join(" and "), e.message));
                }
                None
            }
        }
    } else {
        None
    };

    // Profiles add what the user could have written, each entry following
    // the rules: so after the map, before what they add is checked.
    if let (false, Some(m)) = (file.profiles.is_empty(), &map) {
        let mark = copy_mark(&file, m);
        crate::profiles::expand(&mut file, m, &mark, &mut problems);
    }
    let mut fields = Vec::new();
    for (i, f) in file.fields.iter().enumerate() {
        let line = f.referenced.line();
        let f = &f.value;
        let at = format!("line {line}: field {} ({} {})", i + 1, f.group, f.kind);
        if let Some(p) = subdomain_problem(&f.group) {
            problems.push(format!("{at}: group `{}` is not valid: {p}", f.group));
            continue;
        }
        if let Some(m) = &map {
            if m.map_group(&f.group, Direction::ToCluster).is_none() {
                problems.push(format!(
                    "{at}: no rule renames group `{}` (fields name the app's original group)",
                    f.group
                ));
            }
        }
        if f.kind.is_empty() || !f.kind.starts_with(|c: char| c.is_ascii_uppercase()) {
            problems.push(format!(
                "{at}: kind `{}` must be a Kubernetes kind (UpperCamelCase)",
                f.kind
            ));
        }
        match FieldPath::parse(&f.path) {
            Ok(path) => fields.push(CustomField {
                group: f.group.clone(),
                kind: f.kind.clone(),
                path,
                form: match f.form {
                    FieldForm::Group => Form::Group,
                    FieldForm::ApiVersion => Form::ApiVersion,
                    FieldForm::ResourceGroup => Form::QualifiedName,
                },
            }),
            Err(e) => problems.push(format!("{at}: {e}")),
        }
    }

    let names = map
        .as_ref()
        .and_then(|m| object_names(&file, m, &mut problems));
    let metadata = file.metadata.as_ref().and_then(|spec| {
        let rules = map.as_ref().map_or(&[][..], |m| m.rules());
        crate::metadata::metadata_from_spec(spec, rules, &mut problems)
    });
    let short_names = short_names(&file, &mut problems);
    let map = map.map(|m| {
        m.with_object_names(names)
            .with_metadata(metadata)
            .with_short_names(short_names)
    });

    check_listeners(&file.listeners, &mut problems);
    check_lending(&file, &mut problems);
    let allowed_hosts = allowed_hosts(&file.listeners.allowed_hosts, &mut problems);
    problems.extend(file.limits.problems());
    if let Some(front) = &file.front {
        check_front(front, file.publish.is_some(), &mut problems);
    }
    if let Some(p) = &file.publish {
        check_publish(p, file.front.is_some(), &mut problems);
    }
    if let Some(w) = &file.webhooks {
        check_webhooks(w, &mut problems);
    }

    match map {
        Some(map) if problems.is_empty() => Ok(Settings {
            map,
            fields,
            limits: file.limits.clone(),
            allowed_hosts,
            file,
        }),
        _ => Err(ConfigError { problems }),
    }
}

/// The copy's mark as one DNS label (`team-b-1a2b3c4d`): the `names:`
/// prefix or suffix, or the prefix derived from the rules (as
/// [`object_names`] derives it), without its separators. For profiles'
/// nested key prefixes.
fn copy_mark(file: &ConfigFile, map: &GroupMap) -> String {
    let given = file
        .names
        .as_ref()
        .and_then(|n| n.value.prefix.clone().or_else(|| n.value.suffix.clone()));
    let affix = given.unwrap_or_else(|| {
        let sides: Vec<(&str, &str)> = map
            .rules()
            .iter()
            .map(|r| r.rule.ends(Direction::ToCluster))
            .collect();
        crate::object_names::derived_prefix(&sides)
    });
    affix
        .trim_matches(|c| c == '-' || c == '.')
        .replace('.', "-")
}

/// The `names:` section, or what a config without one gets: the default
/// kinds under a prefix derived from the rules, so that two copies never
/// overwrite each other's cluster-scoped objects. `kinds: []` turns it off.
fn object_names(
    file: &ConfigFile,
    map: &GroupMap,
    problems: &mut Vec<String>,
) -> Option<ObjectNames> {
    let sides: Vec<(&str, &str)> = map
        .rules()
        .iter()
        .map(|r| r.rule.ends(Direction::ToCluster))
        .collect();
    let Some(n) = file.names.as_ref() else {
        // Publish mode serves a central cluster's objects, no copy of an
        // app whose cluster-scoped objects could clash.
        if file.publish.is_some() {
            return None;
        }
        return ObjectNames::derived(&sides, &ObjectNames::default_kinds(), &[]).ok();
    };
    let line = n.referenced.line();
    let n = &n.value;
    let kinds = n.kinds.clone().unwrap_or_else(ObjectNames::default_kinds);
    let named = match (&n.prefix, &n.suffix) {
        (None, None) if kinds.is_empty() && n.namespaced.is_none() => return None,
        (None, None) => ObjectNames::derived(&sides, &kinds, &n.keep),
        (p, s) => ObjectNames::new(p.as_deref(), s.as_deref(), &kinds, &n.keep),
    };
    let named = match &n.namespaced {
        Some(ns) => named.and_then(|o| o.with_fixed(&ns.kinds, &ns.names)),
        None => named,
    };
    named
        .map_err(|ps| {
            problems.extend(ps.into_iter().map(|p| format!("line {line}: {p}")));
        })
        .ok()
}

/// `names.shortNamePrefix` and `names.keepCategories`: off unless a
/// prefix is given.
fn short_names(file: &ConfigFile, problems: &mut Vec<String>) -> Option<ShortNames> {
    let n = file.names.as_ref()?;
    let line = n.referenced.line();
    let Some(prefix) = n.value.short_name_prefix.as_deref() else {
        if n.value.keep_categories.is_some() {
            problems.push(format!(
                "line {line}: names.keepCategories needs names.shortNamePrefix"
            ));
        }
        return None;
    };
    ShortNames::new(prefix, n.value.keep_categories.as_deref())
        .map_err(|ps| {
            problems.extend(ps.into_iter().map(|p| format!("line {line}: {p}")));
        })
        .ok()
}

/// Why a rule's keys make no rule.
#[derive(Debug, thiserror::Error)]
enum RuleShapeError {
    #[error("`from` needs a `to`")]
    FromWithoutTo,
    #[error("`to` needs a `from`")]
    ToWithoutFrom,
    #[error("`fromSuffix` needs a `toSuffix`")]
    FromSuffixWithoutToSuffix,
    #[error("`toSuffix` needs a `fromSuffix`")]
    ToSuffixWithoutFromSuffix,
    #[error("a rule needs `from`/`to` or `fromSuffix`/`toSuffix`")]
    Neither,
    #[error(
        "a rule is either exact (`from`/`to`) or a suffix rule (`fromSuffix`/`toSuffix`), not both"
    )]
    Both,
}

fn rule_from_spec(s: &RuleSpec) -> Result<MapRule, RuleShapeError> {
    let reference_keys = s.reference_keys.unwrap_or(true);
    let rule = match (&s.from, &s.to, &s.from_suffix, &s.to_suffix) {
        (Some(from), Some(to), None, None) => Rule::Exact {
            from: from.clone(),
            to: to.clone(),
        },
        (None, None, Some(from), Some(to)) => Rule::Suffix {
            from: from.clone(),
            to: to.clone(),
        },
        (Some(_), None, None, None) => return Err(RuleShapeError::FromWithoutTo),
        (None, Some(_), None, None) => return Err(RuleShapeError::ToWithoutFrom),
        (None, None, Some(_), None) => return Err(RuleShapeError::FromSuffixWithoutToSuffix),
        (None, None, None, Some(_)) => return Err(RuleShapeError::ToSuffixWithoutFromSuffix),
        (None, None, None, None) => return Err(RuleShapeError::Neither),
        _ => return Err(RuleShapeError::Both),
    };
    Ok(MapRule {
        rule,
        reference_keys,
    })
}

fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

fn check_listeners(l: &Listeners, problems: &mut Vec<String>) {
    if let Some(http) = &l.http {
        if !is_loopback(http) {
            problems.push(format!(
                "listeners.http: {http} is not a loopback address; the plain-HTTP listener \
                 carries regroup's own credentials and must stay on 127.0.0.1 or [::1]"
            ));
        }
    }
    if let Some(tls) = &l.tls {
        match (&tls.cert_file, &tls.key_file, &tls.generated_ca_file) {
            (Some(_), Some(_), None) | (None, None, Some(_)) => {}
            (Some(_), None, _) | (None, Some(_), _) => {
                problems.push("listeners.tls: `certFile` and `keyFile` go together".into())
            }
            (Some(_), Some(_), Some(_)) => problems.push(
                "listeners.tls: use either `certFile`/`keyFile` or `generatedCaFile`, not both"
                    .into(),
            ),
            (None, None, None) => problems
                .push("listeners.tls: needs `certFile`/`keyFile` or `generatedCaFile`".into()),
        }
    }
}

/// `credentials.passThrough: false` drops a caller's own token and sends
/// regroup's: on a TLS listener beyond loopback that lends regroup's
/// credential to anyone who sends any token, so it needs the explicit opt-in.
fn check_lending(file: &ConfigFile, problems: &mut Vec<String>) {
    let Some(tls) = &file.listeners.tls else {
        return;
    };
    if !file.credentials.pass_through
        && !is_loopback(&tls.listen)
        && !tls.dangerous_lend_credentials
    {
        problems.push(format!(
            "credentials.passThrough: false with listeners.tls.listen {} beyond loopback would \
             replace every caller's token with regroup's own credential; keep passThrough: true \
             (callers beyond loopback then act as themselves), bind the TLS listener to loopback, \
             or set listeners.tls.dangerousLendCredentials: true if anyone who can reach the port \
             may act as regroup",
            tls.listen
        ));
    }
}

/// `listeners.allowedHosts`, normalized: lower case, IPv6 without brackets.
fn allowed_hosts(hosts: &[String], problems: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for h in hosts {
        let n = h.trim().to_ascii_lowercase();
        let n = n
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(&n)
            .to_owned();
        let is_ip = n.parse::<std::net::IpAddr>().is_ok();
        if n.is_empty() || n.contains(['/', ' ', '@', '[', ']']) || (!is_ip && n.contains(':')) {
            problems.push(format!(
                "listeners.allowedHosts: `{h}` is not a host name or IP address (no scheme, no port)"
            ));
            continue;
        }
        out.push(n);
    }
    out
}

/// The host of an http(s) URL, or `None` when `url` is not one.
fn url_host(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    (!host.is_empty()).then_some(host)
}

fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn check_front(f: &Front, publish: bool, problems: &mut Vec<String>) {
    if f.cert_file.is_some() != f.key_file.is_some() {
        problems.push("front: `certFile` and `keyFile` go together".into());
    }
    if !f.request_header.from_cluster && f.request_header.client_ca_file.is_none() {
        problems.push(
            "front.requestHeader: with `fromCluster: false`, `clientCaFile` is required".into(),
        );
    }
    match (publish, f.backend.is_empty()) {
        (true, true) => return,
        (true, false) => {
            problems.push(
                "front.backend: leave it out with `publish:` (publish.central is the backend)"
                    .into(),
            );
            return;
        }
        (false, true) => {
            problems.push("front.backend is required (the app's own aggregated server)".into());
            return;
        }
        (false, false) => {}
    }
    let Some(host) = url_host(&f.backend) else {
        problems.push(format!(
            "front.backend: `{}` must be an http:// or https:// URL",
            f.backend
        ));
        return;
    };
    if f.dangerous_insecure_backend && !is_loopback_host(host) {
        problems.push(format!(
            "front.dangerousInsecureBackend is only allowed for a loopback backend, not `{host}`"
        ));
    }
}

/// `publish:`: it needs the front, groups, and somewhere to put objects.
fn check_publish(p: &crate::schema::Publish, has_front: bool, problems: &mut Vec<String>) {
    if !has_front {
        problems
            .push("publish: needs `front:` (the listener the cluster's aggregator calls)".into());
    }
    if p.central.kubeconfig.is_none() {
        problems.push(
            "publish.central.kubeconfig is required (the central cluster's server and credential; never the remote cluster's defaults)"
                .into(),
        );
    }
    if p.groups.is_empty() {
        problems.push("publish.groups: name at least one group of the central cluster".into());
    }
    for g in &p.groups {
        if g.is_empty() || !g.contains('.') {
            problems.push(format!(
                "publish.groups: `{g}` is not an API group (a DNS name)"
            ));
        }
    }
    if p.target_namespace.is_none() && !p.match_namespaces {
        problems.push(
            "publish: give `targetNamespace`, or `matchNamespaces: true` (each remote namespace to its namesake)"
                .into(),
        );
    }
    if let Some(id) = &p.cluster_id {
        let ok = !id.is_empty()
            && id.len() <= 63
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && id.as_bytes()[0].is_ascii_alphanumeric()
            && id.as_bytes()[id.len() - 1].is_ascii_alphanumeric();
        if !ok {
            problems.push(format!(
                "publish.clusterId: `{id}` must be a label value (63 characters at most, alphanumerics, `-`, `_`, `.`)"
            ));
        }
    }
    for f in &p.connection_secrets.fields {
        if f.is_empty() || f.split('.').any(str::is_empty) {
            problems.push(format!(
                "publish.connectionSecrets.fields: `{f}` is not a dotted path"
            ));
        }
    }
    if p.connection_secrets.resync_seconds == 0 {
        problems.push("publish.connectionSecrets.resyncSeconds must be at least 1".into());
    }
    if let Some(s) = &p.credentials.default_secret {
        let dns = |v: &str| {
            !v.is_empty()
                && v.len() <= 253
                && v.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
        };
        if !dns(&s.namespace) || !dns(&s.name) {
            problems.push(format!(
                "publish.credentials.defaultSecret: `{}/{}` is not a Secret's namespace and name",
                s.namespace, s.name
            ));
        }
    }
    if p.leader_election.lease_seconds < 3 {
        problems.push("publish.leaderElection.leaseSeconds must be at least 3".into());
    }
}

fn check_webhooks(w: &crate::schema::Webhooks, problems: &mut Vec<String>) {
    if w.cert_file.is_some() != w.key_file.is_some() {
        problems.push("webhooks: `certFile` and `keyFile` go together".into());
    }
    if let Some(i) = &w.issue_from {
        if w.cert_file.is_some() {
            problems.push("webhooks: give `certFile`/`keyFile` or `issueFrom`, not both".into());
        }
        if i.dns_names.is_empty() {
            problems.push(
                "webhooks.issueFrom.dnsNames: list the names kube-apiserver calls the listener by"
                    .into(),
            );
        }
        for n in &i.dns_names {
            if let Some(why) = crate::dns::subdomain_problem(n) {
                problems.push(format!("webhooks.issueFrom.dnsNames: `{n}`: {why}"));
            }
        }
    }
    if let Some(r) = &w.reach_at {
        match (&r.url, &r.service) {
            (Some(u), None) if u.starts_with("https://") && url_host(u).is_some() => {}
            (None, Some(_)) => {}
            (Some(u), None) => problems.push(format!(
                "webhooks.reachAt.url: `{u}` must be an https:// URL"
            )),
            _ => problems.push("webhooks.reachAt: give exactly one of `url`, `service`".into()),
        }
    }
    if w.hooks.is_empty() {
        problems.push("webhooks.hooks: list at least one webhook".into());
    }
    let mut paths: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for h in &w.hooks {
        let at = format!("webhooks.hooks (line {})", h.referenced.line());
        let h = &h.value;
        let path = h.served_path();
        if h.name.is_empty() || h.name.contains(['/', '?', '#', ' ']) {
            problems.push(format!(
                "{at}: name `{}` must be non-empty, without `/`, `?`, `#` or spaces",
                h.name
            ));
        }
        if !path.starts_with('/') || path.contains(['?', '#']) || path.split('/').any(|s| s == "..")
        {
            problems.push(format!(
                "{at}: path `{path}` must start with `/`, without `?`, `#` or `..`"
            ));
        }
        if paths.contains(&path) {
            problems.push(format!("{at}: path `{path}` is served by another webhook"));
        }
        if names.contains(&h.name) {
            problems.push(format!("{at}: name `{}` is used twice", h.name));
        }
        paths.push(path);
        names.push(h.name.clone());
        if let Some(r) = &h.registration {
            let given = [
                r.url.is_some(),
                r.service.is_some(),
                r.configuration.is_some(),
            ];
            if given.iter().filter(|g| **g).count() != 1 {
                problems.push(format!(
                    "{at}: registration: give exactly one of `url`, `service`, `configuration`"
                ));
            }
            if r.webhook.is_some() && r.configuration.is_none() {
                problems.push(format!(
                    "{at}: registration: `webhook` goes with `configuration`"
                ));
            }
            if w.reach_at.is_none() {
                problems.push(format!(
                    "{at}: registration needs `webhooks.reachAt` (where the cluster reaches regroup)"
                ));
            }
            if w.cert_file.is_some() && w.ca_file.is_none() {
                problems.push(format!(
                    "{at}: registration needs `webhooks.caFile` (the CA regroup puts in caBundle)"
                ));
            }
            if w.issue_from.is_some() {
                problems.push(format!(
                    "{at}: registration with `webhooks.issueFrom`: the app keeps its CA and its \
                     registrations' caBundle itself (cainjector injects it), so regroup amends no \
                     registration; point the registration's Service at the listener instead"
                ));
            }
        }
        match url_host(&h.backend) {
            None => problems.push(format!(
                "{at}: backend `{}` must be an http:// or https:// URL",
                h.backend
            )),
            Some(host) if w.dangerous_insecure_backend && !is_loopback_host(host) => {
                problems.push(format!(
                    "webhooks.dangerousInsecureBackend is only allowed for loopback backends, not `{host}`"
                ))
            }
            Some(_) => {}
        }
    }
}

impl Settings {
    /// Valid but risky choices, for `regroup check` and the serve log.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(tls) = &self.file.listeners.tls {
            if tls.dangerous_lend_credentials {
                if is_loopback(&tls.listen) {
                    w.push(format!(
                        "listeners.tls.dangerousLendCredentials has no effect: {} is loopback",
                        tls.listen
                    ));
                } else {
                    w.push(format!(
                        "listeners.tls.dangerousLendCredentials: callers of {} without a credential \
                         of their own are served with regroup's: anyone who can reach that port \
                         acts as regroup",
                        tls.listen
                    ));
                }
            }
        }
        if self.file.publish.is_none() {
            w.extend(self.shared_names_warning());
        }
        if self.file.upstream.dangerous_insecure_skip_tls_verify {
            w.push(
                "upstream.dangerousInsecureSkipTlsVerify: the API server's certificate is not verified"
                    .into(),
            );
        }
        w
    }

    /// What two copies of the app would overwrite in each other because
    /// `names:` leaves it shared: the default kinds it does not rename.
    fn shared_names_warning(&self) -> Option<String> {
        let named = self.map.object_names();
        let shared: Vec<&str> = crate::object_names::DEFAULT_KINDS
            .iter()
            .copied()
            .filter(|k| !named.is_some_and(|n| n.kinds().iter().any(|nk| nk.kind == *k)))
            .collect();
        if shared.is_empty() {
            return None;
        }
        let why = if named.is_none() {
            "names.kinds: []"
        } else {
            "names.kinds"
        };
        Some(format!(
            "{why} leaves {} shared: the app's objects of these kinds keep their names on the \
             cluster, so a second copy of the app that writes the same name (Kopf's \
             `auto.kopf.dev`, a fixed ClusterRole) overwrites this copy's; list them in \
             names.kinds (or drop names.kinds for the default) unless only one copy runs",
            shared.join(", ")
        ))
    }

    /// The namespaces the app shares with other copies
    /// (`names.sharedNamespaces`, by default `kube-system`): what
    /// manifests put there gets the copy's mark. Empty without `names:`
    /// renaming (`names: {kinds: []}` and no prefix).
    pub fn shared_namespaces(&self) -> Vec<String> {
        if self.map.object_names().is_none() {
            return Vec::new();
        }
        match self
            .file
            .names
            .as_ref()
            .and_then(|n| n.value.shared_namespaces.clone())
        {
            Some(list) => list,
            None => crate::object_names::DEFAULT_SHARED_NAMESPACES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }

    /// The effective rename table and settings, as `regroup check` prints it.
    /// Publish mode at a glance: what is published under which name, where
    /// each remote namespace's objects go, what is copied down.
    fn publish_table(&self, p: &crate::schema::Publish) -> String {
        let mut out = String::from("\nPUBLISH (docs/publish.md)\n");
        let central = p
            .central
            .kubeconfig
            .as_ref()
            .map_or("?".into(), |k| k.display().to_string());
        out.push_str(&format!("central cluster: {central}\n"));
        for g in &p.groups {
            let remote = self
                .map
                .map_group(g, Direction::ToCluster)
                .unwrap_or_else(|| g.clone());
            out.push_str(&format!("  {g} -> {remote} (this cluster's name)\n"));
        }
        let rule = match (&p.target_namespace, p.match_namespaces) {
            (_, true) => "its namesake".to_string(),
            (Some(t), false) => format!("`{t}`"),
            (None, false) => "nowhere (give targetNamespace or matchNamespaces)".to_string(),
        };
        out.push_str(&format!(
            "a remote namespace's objects go to: the annotation regroup.dev/publish-target-namespace on its Namespace, else {rule}\n"
        ));
        out.push_str(&format!(
            "cluster id: {}\n",
            p.cluster_id
                .as_deref()
                .unwrap_or("the uid of this cluster's kube-system Namespace")
        ));
        if p.connection_secrets.fields.is_empty() {
            out.push_str("connection secrets: none copied\n");
        } else {
            out.push_str(&format!(
                "connection secrets named at {} copied down every {}s\n",
                p.connection_secrets.fields.join(", "),
                p.connection_secrets.resync_seconds
            ));
        }
        out
    }

    pub fn effective_table(&self) -> String {
        let mut out = String::new();
        let rows: Vec<[String; 5]> = self
            .map
            .rules()
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let (kind, app, cluster) = match &r.rule {
                    Rule::Exact { from, to } => ("exact", from.clone(), to.clone()),
                    Rule::Suffix { from, to } => ("suffix", format!("*.{from}"), format!("*.{to}")),
                };
                [
                    (i + 1).to_string(),
                    kind.into(),
                    app,
                    cluster,
                    if r.reference_keys { "on" } else { "off" }.into(),
                ]
            })
            .collect();
        let header = [
            "RULE",
            "KIND",
            "APP GROUP",
            "CLUSTER GROUP",
            "REFERENCE KEYS",
        ];
        let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.len());
            }
        }
        let mut line = |cells: Vec<&str>| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    l.push_str(c);
                } else {
                    l.push_str(&format!("{c:<w$}  ", w = widths[i]));
                }
            }
            out.push_str(&l);
            out.push('\n');
        };
        line(header.to_vec());
        for r in &rows {
            line(r.iter().map(String::as_str).collect());
        }
        for (i, r) in self.map.rules().iter().enumerate() {
            if r.rule.is_suffix() {
                let (from, to) = r.rule.ends(Direction::ToCluster);
                out.push_str(&format!(
                    "  (rule {}, {}, also maps `{from}` itself to `{to}`)\n",
                    i + 1,
                    describe(&r.rule)
                ));
            }
        }
        if let Some(p) = &self.file.publish {
            out.push_str(&self.publish_table(p));
        }
        if !self.fields.is_empty() {
            out.push_str("\nFIELDS\n");
            for f in &self.fields {
                out.push_str(&format!(
                    "{}/{}  {}  ({:?})\n",
                    f.group, f.kind, f.path, f.form
                ));
            }
        }
        if let Some(n) = self.map.object_names() {
            let (app, cluster) = match n.affix() {
                crate::object_names::Affix::Prefix(p) => ("NAME".to_string(), format!("{p}NAME")),
                crate::object_names::Affix::Suffix(s) => ("NAME".to_string(), format!("NAME{s}")),
            };
            out.push_str(&format!("\nNAMES  {app} -> {cluster}\n"));
            if n.is_derived() {
                let sides: Vec<(&str, &str)> = self
                    .map
                    .rules()
                    .iter()
                    .map(|r| r.rule.ends(Direction::ToCluster))
                    .collect();
                let p = match n.affix() {
                    crate::object_names::Affix::Prefix(p) => p.as_str(),
                    crate::object_names::Affix::Suffix(s) => s.as_str(),
                };
                out.push_str(&format!(
                    "(prefix derived from the rules' cluster groups: pin it with \
                     `names.prefix: {p}` once copies run (`regroup inject` pins it in the \
                     sidecar's configuration); a copy that ran with an earlier regroup's \
                     derived prefix keeps its objects with `names.prefix: {}`)\n",
                    crate::object_names::earlier_derived_prefix(&sides)
                ));
            }
            for k in n.kinds() {
                out.push_str(&format!("{}/{}\n", k.group, k.kind));
            }
            let kept: Vec<&str> = crate::object_names::ALWAYS_KEPT
                .iter()
                .copied()
                .chain(n.keep().iter().map(String::as_str))
                .collect();
            out.push_str(&format!(
                "(kept as they are: system:*, {})\n",
                kept.join(", ")
            ));
            if let Some((kinds, names)) = n.fixed() {
                for k in kinds {
                    out.push_str(&format!(
                        "{}/{} named {} (in any namespace; other names as they are)\n",
                        if k.group.is_empty() { "core" } else { k.group },
                        k.kind,
                        names.join(", ")
                    ));
                }
            }
        }
        if let Some(s) = self.map.short_names() {
            out.push_str(&format!(
                "\nSHORT NAMES AND CATEGORIES (the renamed groups' resources)  NAME -> {}NAME\n",
                s.prefix()
            ));
            out.push_str(&format!(
                "(categories kept as they are: {})\n",
                if s.kept_categories().is_empty() {
                    "none".to_string()
                } else {
                    s.kept_categories().join(", ")
                }
            ));
        }
        if let Some(m) = self.map.metadata() {
            out.push_str("\nMETADATA (label, annotation and finalizer keys; label values)\n");
            for p in m.prefixes() {
                out.push_str(&format!(
                    "prefix  {0}/*, *.{0}/*  ->  {1}/*, *.{1}/*\n",
                    p.app, p.cluster
                ));
            }
            for k in m.keys() {
                out.push_str(&format!("key     {}  ->  {}\n", k.app, k.cluster));
            }
            for v in m.values() {
                out.push_str(&format!(
                    "value   {}: {}  ->  {}\n",
                    v.key, v.value.app, v.value.cluster
                ));
            }
            for e in m.exclusions() {
                let labelled = e
                    .selector
                    .as_ref()
                    .map(|s| format!(" labelled {}", s.as_str()))
                    .unwrap_or_default();
                match &e.name {
                    Some(n) => out.push_str(&format!("never   {} {n}{labelled}\n", e.kind)),
                    None => out.push_str(&format!("never   every {}{labelled}\n", e.kind)),
                }
            }
            out.push_str(&format!(
                "(other copies' keys in these prefixes are shown to the app under `{}.<prefix>`)\n",
                crate::metadata::SHADOW_LABEL
            ));
        }
        if self.file.publish.is_some() {
            return out;
        }
        out.push_str(
            "\nSHARED (not renamed: two copies of the app must not both write them)\n\
             cluster-scoped objects of kinds not listed under NAMES (StorageClass, IngressClass, \
             PriorityClass, RuntimeClass, Namespace, ...)\n\
             objects in a namespace both copies use (ConfigMaps, Leases) other than the fixed \
             names under NAMES (names.namespaced): give each copy its own namespace\n",
        );
        out
    }
}
