//! Every way `regroup_config::load` refuses a configuration, one test per
//! rejection, each pinning what the message says and which line it names.

use regroup_config::{load, Direction, Settings};

/// The problems `load` reports for `yaml`; panics if it is accepted.
#[track_caller]
fn problems(yaml: &str) -> Vec<String> {
    match load(yaml) {
        Ok(_) => panic!("accepted, but should be refused:\n{yaml}"),
        Err(e) => {
            assert!(!e.problems.is_empty(), "an error with no problems");
            assert_eq!(e.to_string(), e.problems.join("\n"));
            e.problems
        }
    }
}

/// The one problem `yaml` has.
#[track_caller]
fn only_problem(yaml: &str) -> String {
    let p = problems(yaml);
    assert_eq!(p.len(), 1, "expected one problem, got {p:#?}");
    p.into_iter().next().unwrap()
}

/// `message` contains every one of `parts`.
#[track_caller]
fn assert_mentions(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "message does not mention {part:?}:\n{message}"
        );
    }
}

#[track_caller]
fn accepted(yaml: &str) -> Settings {
    load(yaml).unwrap_or_else(|e| panic!("refused:\n{e}\n---\n{yaml}"))
}

/// One exact rule, on line 2.
fn exact_rule(from: &str, to: &str) -> String {
    format!("rules:\n  - from: \"{from}\"\n    to: \"{to}\"\n")
}

/// One suffix rule, on line 2.
fn suffix_rule(from: &str, to: &str) -> String {
    format!("rules:\n  - fromSuffix: \"{from}\"\n    toSuffix: \"{to}\"\n")
}

/// A valid group name of exactly `len` characters, ending in `.example.io`.
fn group_of_len(len: usize) -> String {
    let mut g = String::from("example.io");
    assert!(len >= g.len() + 2);
    while g.len() < len {
        let need = len - g.len(); // one label plus its dot
        let k = match need - 1 {
            64 => 62, // leave room for one more one-character label
            n => n.min(63),
        };
        g = format!("{}.{g}", "x".repeat(k));
    }
    assert_eq!(g.len(), len);
    g
}

/// The groups kube-apiserver serves itself that the brief names explicitly.
const BUILTINS: &[&str] = &[
    "apps",
    "batch",
    "autoscaling",
    "policy",
    "extensions",
    "rbac.authorization.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "admissionregistration.k8s.io",
    "networking.k8s.io",
    "storage.k8s.io",
];

/// The configuration from the issue, with the suffix rule's target moved to
/// `pinniped.team1.example.com` (see
/// `exact_target_inside_a_suffix_target_is_not_a_bijection` for why the
/// issue's `team1.example.com` can't sit beside
/// `samplecontroller.team1.example.com`).
const EXAMPLE: &str = "\
# Team 1's copies of sample-controller and Pinniped.
rules:
  - from: samplecontroller.k8s.io
    to: samplecontroller.team1.example.com
  - fromSuffix: pinniped.dev
    toSuffix: pinniped.team1.example.com
fields:
  - group: login.concierge.pinniped.dev
    kind: TokenCredentialRequest
    path: spec.authenticator.apiGroup
    form: group
";

// ------------------------------------------------------------ accepted

#[test]
fn example_config_is_accepted_and_its_table_lists_both_rules() {
    let s = accepted(EXAMPLE);
    assert_eq!(s.map.rules().len(), 2);
    assert_eq!(s.fields.len(), 1);
    assert_eq!(
        s.map
            .map_group("login.concierge.pinniped.dev", Direction::ToCluster)
            .as_deref(),
        Some("login.concierge.pinniped.team1.example.com")
    );
    let table = s.effective_table();
    for part in [
        "exact",
        "samplecontroller.k8s.io",
        "samplecontroller.team1.example.com",
        "suffix",
        "*.pinniped.dev",
        "*.pinniped.team1.example.com",
        "also maps `pinniped.dev` itself to `pinniped.team1.example.com`",
        "login.concierge.pinniped.dev/TokenCredentialRequest",
        "spec.authenticator.apiGroup",
    ] {
        assert!(table.contains(part), "table lacks {part:?}:\n{table}");
    }
    let rows: Vec<&str> = table.lines().collect();
    assert!(rows[0].starts_with("RULE"), "{table}");
    assert!(rows[1].starts_with("1 ") && rows[1].contains("samplecontroller.k8s.io"));
    assert!(rows[2].starts_with("2 ") && rows[2].contains("*.pinniped.dev"));
}

#[test]
fn shipped_example_config_is_accepted() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/config.yaml");
    let Ok(text) = std::fs::read_to_string(path) else {
        // Not written yet; `example_config_is_accepted_and_its_table_lists_both_rules`
        // covers the same configuration inline.
        return;
    };
    let s = accepted(&text);
    let table = s.effective_table();
    assert!(table.contains("samplecontroller.k8s.io"), "{table}");
    assert!(table.contains("*.pinniped.dev"), "{table}");
}

#[test]
fn app_group_merely_ending_in_k8s_io_is_accepted() {
    accepted(&exact_rule(
        "samplecontroller.k8s.io",
        "samplecontroller.team1.example.com",
    ));
    accepted(&exact_rule("metrics.k8s.io", "metrics.team1.example.com"));
    accepted(&suffix_rule(
        "samplecontroller.k8s.io",
        "samplecontroller.team1.example.com",
    ));
}

#[test]
fn reference_keys_switch_is_read_per_rule() {
    let s = accepted(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
    referenceKeys: false
  - from: b.example.io
    to: b.team1.example.com
",
    );
    let switches: Vec<bool> = s.map.rules().iter().map(|r| r.reference_keys).collect();
    assert_eq!(switches, [false, true]);
    assert!(s.effective_table().contains("off"));
}

// ------------------------------------------------- DNS-1123 group names

#[test]
fn uppercase_group_is_not_dns_1123() {
    let m = only_problem(&exact_rule("SampleController.k8s.io", "a.example.com"));
    assert_mentions(
        &m,
        &[
            "line 2: rule 1:",
            "`from: SampleController.k8s.io`",
            "DNS-1123",
            "label `SampleController`",
            "lower case",
        ],
    );
}

#[test]
fn underscore_in_group_is_not_dns_1123() {
    let m = only_problem(&exact_rule("a.example.io", "team_1.example.com"));
    assert_mentions(
        &m,
        &[
            "line 2: rule 1:",
            "`to: team_1.example.com`",
            "label `team_1`",
        ],
    );
}

#[test]
fn group_label_longer_than_63_characters_is_rejected() {
    let long = format!("{}.example.io", "a".repeat(64));
    let m = only_problem(&exact_rule(&long, "a.example.com"));
    assert_mentions(&m, &["line 2:", "no more than 63 characters"]);
    // 63 is fine.
    accepted(&exact_rule(
        &format!("{}.example.io", "a".repeat(63)),
        "a.example.com",
    ));
}

#[test]
fn group_longer_than_253_characters_is_rejected() {
    let m = only_problem(&exact_rule("a.example.io", &group_of_len(254)));
    assert_mentions(
        &m,
        &["line 2:", "`to: ", "no more than 253 characters (has 254)"],
    );
}

#[test]
fn group_with_an_empty_label_is_rejected() {
    let m = only_problem(&exact_rule("a..example.io", "a.example.com"));
    assert_mentions(&m, &["line 2:", "`from: a..example.io`", "empty labels"]);
}

#[test]
fn invalid_suffix_names_the_suffix_key() {
    let m = only_problem(&suffix_rule("Pinniped.dev", "team1.example.com"));
    assert_mentions(&m, &["line 2:", "`fromSuffix: Pinniped.dev`", "DNS-1123"]);
}

#[test]
fn group_with_no_room_for_a_crd_name_is_rejected() {
    // `<plural>.<group>` must fit in 253 characters: one letter and a dot.
    for len in [252, 253] {
        let g = group_of_len(len);
        let m = only_problem(&exact_rule("a.example.io", &g));
        assert_mentions(
            &m,
            &[
                "line 2: rule 1:",
                &format!("`to: {g}`"),
                "no room for a CRD name",
                "253",
            ],
        );
        let m = only_problem(&exact_rule(&g, "a.example.com"));
        assert_mentions(&m, &[&format!("`from: {g}`"), "no room for a CRD name"]);
    }
    accepted(&exact_rule("a.example.io", &group_of_len(251)));
}

// ---------------------------------------------------- single-rule shape

#[test]
fn suffix_rule_whose_suffixes_nest_is_rejected() {
    for (from, to) in [
        ("example.com", "team1.example.com"),
        ("team1.example.com", "example.com"),
    ] {
        let m = only_problem(&suffix_rule(from, to));
        assert_mentions(
            &m,
            &[
                "line 2: rule 1",
                &format!("suffix `{from}` -> `{to}`"),
                "suffixes nest",
            ],
        );
    }
    // An exact rule has no such problem: it renames one group.
    accepted(&exact_rule("example.com", "team1.example.com"));
}

#[test]
fn rule_mapping_a_group_to_itself_is_rejected() {
    let m = only_problem(&exact_rule("a.example.io", "a.example.io"));
    assert_mentions(
        &m,
        &["line 2: rule 1:", "`a.example.io` is mapped to itself"],
    );
    let m = only_problem(&suffix_rule("pinniped.dev", "pinniped.dev"));
    assert_mentions(
        &m,
        &["line 2: rule 1:", "`pinniped.dev` is mapped to itself"],
    );
}

#[test]
fn rule_with_both_exact_and_suffix_keys_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
    fromSuffix: pinniped.dev
    toSuffix: team1.example.com
",
    );
    assert_mentions(&m, &["line 2: rule 1:", "not both"]);
}

#[test]
fn from_without_to_is_rejected() {
    let m = only_problem("rules:\n  - from: a.example.io\n");
    assert_mentions(&m, &["line 2: rule 1:", "`from` needs a `to`"]);
}

#[test]
fn to_without_from_is_rejected() {
    let m = only_problem("rules:\n  - to: a.example.io\n");
    assert_mentions(&m, &["line 2: rule 1:", "`to` needs a `from`"]);
}

#[test]
fn from_suffix_without_to_suffix_is_rejected() {
    let m = only_problem("rules:\n  - fromSuffix: pinniped.dev\n");
    assert_mentions(&m, &["line 2: rule 1:", "`fromSuffix` needs a `toSuffix`"]);
}

#[test]
fn to_suffix_without_from_suffix_is_rejected() {
    let m = only_problem("rules:\n  - toSuffix: team1.example.com\n");
    assert_mentions(&m, &["line 2: rule 1:", "`toSuffix` needs a `fromSuffix`"]);
}

#[test]
fn rule_with_no_names_is_rejected() {
    let m = only_problem("rules:\n  - referenceKeys: false\n");
    assert_mentions(
        &m,
        &[
            "line 2: rule 1:",
            "needs `from`/`to` or `fromSuffix`/`toSuffix`",
        ],
    );
}

// ------------------------------------------------------ built-in groups

#[test]
fn core_group_can_not_be_renamed_or_be_a_target() {
    let m = only_problem(&exact_rule("", "core.team1.example.com"));
    assert_mentions(&m, &["line 2: rule 1:", "`from` is empty", "core group"]);
    let m = only_problem(&exact_rule("core.example.io", ""));
    assert_mentions(&m, &["line 2: rule 1:", "`to` is empty", "core group"]);
}

#[test]
fn builtin_group_can_not_be_renamed() {
    for g in BUILTINS {
        let m = only_problem(&exact_rule(g, "renamed.team1.example.com"));
        assert_mentions(
            &m,
            &[
                "line 2: rule 1:",
                &format!("`from: {g}`"),
                "kube-apiserver serves itself",
            ],
        );
    }
}

#[test]
fn builtin_group_can_not_be_a_target() {
    for g in BUILTINS {
        let m = only_problem(&exact_rule("foo.example.io", g));
        assert_mentions(
            &m,
            &[
                "line 2: rule 1:",
                &format!("`to: {g}`"),
                "kube-apiserver serves itself",
            ],
        );
    }
}

#[test]
fn suffix_covering_a_builtin_group_is_rejected() {
    let m = only_problem(&suffix_rule("k8s.io", "k8s.team1.example.com"));
    assert_mentions(
        &m,
        &[
            "line 2: rule 1:",
            "`fromSuffix: k8s.io` covers `admission.k8s.io`",
            "kube-apiserver serves itself",
        ],
    );
    let m = only_problem(&suffix_rule("authorization.k8s.io", "authz.example.com"));
    assert_mentions(
        &m,
        &["`fromSuffix: authorization.k8s.io` covers `authorization.k8s.io`"],
    );
    let m = only_problem(&suffix_rule("apps", "apps.team1.example.com"));
    assert_mentions(&m, &["`fromSuffix: apps` covers `apps`"]);
    let m = only_problem(&suffix_rule("pinniped.dev", "k8s.io"));
    assert_mentions(&m, &["`toSuffix: k8s.io` covers `admission.k8s.io`"]);
}

// ------------------------------------------- pairs of rules (bijection)

#[test]
fn errors_naming_two_rules_give_both_lines() {
    let m = only_problem(
        "# two rules, one target
rules:
  - from: samplecontroller.k8s.io
    to: samplecontroller.team1.example.com
  - from: other.k8s.io
    to: samplecontroller.team1.example.com
",
    );
    assert!(m.starts_with("lines 3 and 5: "), "{m}");
    assert_mentions(&m, &["rule 1", "rule 2"]);
}

#[test]
fn two_originals_to_one_target_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: shared.team1.example.com

  - from: b.example.io
    to: shared.team1.example.com
",
    );
    assert_mentions(
        &m,
        &[
            "lines 2 and 5:",
            "not a bijection",
            "`a.example.io` (rule 1) and `b.example.io` (rule 2) would both become \
             `shared.team1.example.com`",
        ],
    );
}

#[test]
fn exact_target_inside_a_suffix_target_is_not_a_bijection() {
    // The issue's example: `samplecontroller.pinniped.dev` falls under the
    // suffix rule and would become `samplecontroller.team1.example.com` too.
    let m = only_problem(
        "rules:
  - from: samplecontroller.k8s.io
    to: samplecontroller.team1.example.com
  - fromSuffix: pinniped.dev
    toSuffix: team1.example.com
fields:
  - group: login.concierge.pinniped.dev
    kind: TokenCredentialRequest
    path: spec.authenticator.apiGroup
    form: group
",
    );
    assert_mentions(
        &m,
        &[
            "lines 2 and 4:",
            "not a bijection",
            "`samplecontroller.k8s.io` (rule 1) and `samplecontroller.pinniped.dev` (rule 2) \
             would both become `samplecontroller.team1.example.com`",
        ],
    );
}

#[test]
fn nested_suffix_targets_are_not_a_bijection() {
    let m = only_problem(
        "rules:
  - fromSuffix: a.example.io
    toSuffix: team1.example.com
  - fromSuffix: b.example.io
    toSuffix: x.team1.example.com
",
    );
    assert_mentions(
        &m,
        &[
            "lines 2 and 4:",
            "not a bijection",
            "`x.a.example.io` (rule 1) and `b.example.io` (rule 2) would both become \
             `x.team1.example.com`",
        ],
    );
}

#[test]
fn duplicate_from_is_rejected() {
    for second_to in ["b.team1.example.com", "a.team1.example.com"] {
        let m = only_problem(&format!(
            "rules:
  - from: a.example.io
    to: a.team1.example.com
  - from: a.example.io
    to: {second_to}
"
        ));
        assert_mentions(
            &m,
            &[
                "lines 2 and 4:",
                "duplicate rules",
                "both rename `a.example.io`",
            ],
        );
    }
}

#[test]
fn target_that_is_another_rules_original_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: b.example.io
  - from: b.example.io
    to: c.example.io
",
    );
    assert_mentions(
        &m,
        &[
            "lines 2 and 4:",
            "chained rules",
            "rule 1 (`a.example.io` -> `b.example.io`) produces `b.example.io`, which rule 2",
        ],
    );
}

#[test]
fn target_under_another_rules_original_suffix_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.pinniped.dev
  - fromSuffix: pinniped.dev
    toSuffix: team1.example.com
",
    );
    assert_mentions(
        &m,
        &[
            "lines 2 and 4:",
            "chained rules",
            "produces `a.pinniped.dev`",
        ],
    );
}

#[test]
fn exact_rule_disagreeing_with_an_overlapping_suffix_rule_is_rejected() {
    let m = only_problem(
        "rules:
  - fromSuffix: pinniped.dev
    toSuffix: team1.example.com
  - from: login.concierge.pinniped.dev
    to: login.team2.example.com
",
    );
    assert_mentions(
        &m,
        &[
            "lines 2 and 4:",
            "overlapping rules",
            "both rename `login.concierge.pinniped.dev` differently",
        ],
    );
}

#[test]
fn exact_rule_agreeing_with_an_overlapping_suffix_rule_is_accepted() {
    let s = accepted(
        "rules:
  - fromSuffix: pinniped.dev
    toSuffix: team1.example.com
  - from: login.concierge.pinniped.dev
    to: login.concierge.team1.example.com
    referenceKeys: false
",
    );
    assert_eq!(s.map.rules().len(), 2);
}

#[test]
fn nested_suffix_rules_disagreeing_are_rejected() {
    // Either order; the message names the narrower suffix, the one both cover.
    let wide = "  - fromSuffix: pinniped.dev\n    toSuffix: team1.example.com\n";
    let narrow =
        "  - fromSuffix: concierge.pinniped.dev\n    toSuffix: concierge.team2.example.com\n";
    for yaml in [
        format!("rules:\n{wide}{narrow}"),
        format!("rules:\n{narrow}{wide}"),
    ] {
        let m = only_problem(&yaml);
        assert_mentions(
            &m,
            &[
                "lines 2 and 4:",
                "overlapping rules",
                "both rename `concierge.pinniped.dev` differently",
            ],
        );
    }
}

#[test]
fn nested_suffix_rules_agreeing_are_accepted() {
    accepted(
        "rules:
  - fromSuffix: pinniped.dev
    toSuffix: team1.example.com
  - fromSuffix: concierge.pinniped.dev
    toSuffix: concierge.team1.example.com
",
    );
}

// ----------------------------------------------------------- unknown keys

#[test]
fn unknown_top_level_key_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
rulez: []
",
    );
    assert_mentions(&m, &["line 4", "unknown field `rulez`"]);
}

#[test]
fn unknown_key_inside_a_rule_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
    referencekeys: false
",
    );
    assert_mentions(
        &m,
        &["line 4", "unknown field `referencekeys`", "referenceKeys"],
    );
}

#[test]
fn unknown_key_inside_a_section_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
listeners:
  htpp: 127.0.0.1:8001
",
    );
    assert_mentions(&m, &["line 5", "unknown field `htpp`"]);
}

// ----------------------------------------------------------------- fields

#[test]
fn field_for_a_group_no_rule_renames_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
fields:
  - group: b.example.io
    kind: Foo
    path: spec.apiGroup
    form: group
",
    );
    assert_mentions(
        &m,
        &[
            "line 5: field 1 (b.example.io Foo):",
            "no rule renames group `b.example.io`",
        ],
    );
}

#[test]
fn field_naming_the_cluster_group_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
fields:
  - group: a.team1.example.com
    kind: Foo
    path: spec.apiGroup
    form: group
",
    );
    assert_mentions(&m, &["line 5:", "app's original group"]);
}

#[test]
fn field_with_a_bad_path_is_rejected() {
    for (path, says) in [
        ("spec..apiGroup", "empty field name"),
        ("spec.refs[0].apiGroup", "only `[]` (every element)"),
        ("'metadata.annotations[\"a.b/c'", "unterminated"),
        ("\"\"", "path is empty"),
    ] {
        let m = only_problem(&format!(
            "rules:
  - from: a.example.io
    to: a.team1.example.com
fields:
  - group: a.example.io
    kind: Foo
    path: {path}
    form: group
"
        ));
        assert_mentions(&m, &["line 5: field 1 (a.example.io Foo):", says]);
    }
}

#[test]
fn field_with_a_lowercase_kind_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
fields:
  - group: a.example.io
    kind: foo
    path: spec.apiGroup
    form: group
",
    );
    assert_mentions(&m, &["line 5:", "kind `foo`", "UpperCamelCase"]);
}

#[test]
fn field_with_an_invalid_group_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
fields:
  - group: A.example.io
    kind: Foo
    path: spec.apiGroup
    form: group
",
    );
    assert_mentions(&m, &["line 5:", "group `A.example.io` is not valid"]);
}

#[test]
fn field_with_an_unknown_form_is_rejected() {
    let m = only_problem(
        "rules:
  - from: a.example.io
    to: a.team1.example.com
fields:
  - group: a.example.io
    kind: Foo
    path: spec.apiGroup
    form: plural
",
    );
    assert_mentions(
        &m,
        &["line 8", "unknown variant `plural`", "resource.group"],
    );
}

#[test]
fn field_under_a_suffix_rule_is_accepted_in_every_form() {
    let s = accepted(
        "rules:
  - fromSuffix: pinniped.dev
    toSuffix: pinniped.team1.example.com
fields:
  - group: config.supervisor.pinniped.dev
    kind: FederationDomain
    path: spec.identityProviders[].objectRef.apiGroup
    form: group
  - group: config.supervisor.pinniped.dev
    kind: FederationDomain
    path: spec.ref
    form: apiVersion
  - group: config.supervisor.pinniped.dev
    kind: FederationDomain
    path: spec.crd
    form: resource.group
",
    );
    let forms: Vec<_> = s.fields.iter().map(|f| f.form).collect();
    use regroup_config::Form;
    assert_eq!(forms, [Form::Group, Form::ApiVersion, Form::QualifiedName]);
    assert_eq!(
        s.fields[0].path.to_string(),
        "spec.identityProviders[].objectRef.apiGroup"
    );
}

// -------------------------------------------------------------- listeners

#[test]
fn http_listener_must_be_on_loopback() {
    for addr in ["0.0.0.0:8001", "10.1.2.3:8001", "\"[::]:8001\""] {
        let m = only_problem(&format!(
            "rules:\n  - from: a.example.io\n    to: a.team1.example.com\nlisteners:\n  http: {addr}\n"
        ));
        assert_mentions(&m, &["listeners.http:", "not a loopback address"]);
    }
    for addr in ["127.0.0.1:8001", "\"[::1]:8001\""] {
        accepted(&format!(
            "rules:\n  - from: a.example.io\n    to: a.team1.example.com\nlisteners:\n  http: {addr}\n"
        ));
    }
}

#[test]
fn tls_listener_needs_one_source_of_certificates() {
    for (tls, says) in [
        ("certFile: /c.pem", "`certFile` and `keyFile` go together"),
        ("keyFile: /k.pem", "`certFile` and `keyFile` go together"),
        (
            "certFile: /c.pem\n    keyFile: /k.pem\n    generatedCaFile: /ca.pem",
            "not both",
        ),
        ("{}", "needs `certFile`/`keyFile` or `generatedCaFile`"),
    ] {
        let tls = if tls == "{}" {
            String::new()
        } else {
            format!("\n    {tls}")
        };
        let m = only_problem(&format!(
            "rules:\n  - from: a.example.io\n    to: a.team1.example.com\nlisteners:\n  tls:\n    listen: 127.0.0.1:8443{tls}\n"
        ));
        assert_mentions(&m, &["listeners.tls:", says]);
    }
}

// ------------------------------------------------------------------ front

fn front(body: &str) -> String {
    format!("rules:\n  - from: a.example.io\n    to: a.team1.example.com\nfront:\n  listen: 0.0.0.0:8443\n{body}")
}

#[test]
fn insecure_backend_must_be_on_loopback() {
    for (backend, host) in [
        ("https://10.0.0.5:8443", "10.0.0.5"),
        ("https://app.default.svc:8443", "app.default.svc"),
        ("https://127.0.0.1.nip.io:8443", "127.0.0.1.nip.io"),
        (
            "https://localhost.evil.example.com",
            "localhost.evil.example.com",
        ),
        (
            "https://127.0.0.1@evil.example.com",
            "127.0.0.1@evil.example.com",
        ),
    ] {
        let m = only_problem(&front(&format!(
            "  backend: {backend}\n  dangerousInsecureBackend: true\n"
        )));
        assert_mentions(
            &m,
            &[
                "front.dangerousInsecureBackend",
                "loopback",
                &format!("`{host}`"),
            ],
        );
        // Verified backends may live anywhere.
        accepted(&front(&format!("  backend: {backend}\n")));
    }
    for backend in [
        "https://127.0.0.1:8443",
        "https://localhost:8443",
        "\"https://[::1]:8443\"",
        "http://127.0.0.1",
    ] {
        accepted(&front(&format!(
            "  backend: {backend}\n  dangerousInsecureBackend: true\n"
        )));
    }
}

#[test]
fn front_backend_must_be_an_http_url() {
    let m = only_problem(&front("  backend: 127.0.0.1:8443\n"));
    assert_mentions(&m, &["front.backend:", "http:// or https://"]);
}

#[test]
fn front_cert_and_key_go_together() {
    let m = only_problem(&front(
        "  backend: https://127.0.0.1:8443\n  certFile: /c.pem\n",
    ));
    assert_mentions(&m, &["front:", "`certFile` and `keyFile` go together"]);
}

#[test]
fn front_request_header_without_cluster_needs_a_client_ca() {
    let m = only_problem(&front(
        "  backend: https://127.0.0.1:8443\n  requestHeader:\n    fromCluster: false\n",
    ));
    assert_mentions(&m, &["front.requestHeader:", "`clientCaFile` is required"]);
}

// --------------------------------------------------------------- webhooks

fn webhooks(body: &str) -> String {
    format!("rules:\n  - from: a.example.io\n    to: a.team1.example.com\nwebhooks:\n  listen: 0.0.0.0:9444\n{body}")
}

#[test]
fn webhooks_are_listed_with_http_backends_and_distinct_paths() {
    accepted(&webhooks(
        "  hooks:\n    - name: validate-foo\n      backend: https://127.0.0.1:9443/validate\n    - name: convert\n      path: /convert/bars\n      backend: https://127.0.0.1:9443/convert\n",
    ));
    let m = only_problem(&webhooks("  hooks: []\n"));
    assert_mentions(&m, &["webhooks.hooks", "at least one"]);
    let m = only_problem(&webhooks(
        "  hooks:\n    - name: v\n      backend: 127.0.0.1:9443/validate\n",
    ));
    assert_mentions(&m, &["webhooks.hooks (line 7)", "http:// or https://"]);
    let m = only_problem(&webhooks(
        "  hooks:\n    - name: a\n      path: /x\n      backend: https://127.0.0.1/a\n    - name: b\n      path: /x\n      backend: https://127.0.0.1/b\n",
    ));
    assert_mentions(&m, &["path `/x` is served by another webhook"]);
    let m = only_problem(&webhooks(
        "  hooks:\n    - name: a\n      path: x/../y\n      backend: https://127.0.0.1/a\n",
    ));
    assert_mentions(&m, &["path `x/../y` must start with `/`"]);
}

#[test]
fn webhooks_insecure_backends_must_be_on_loopback() {
    let m = only_problem(&webhooks(
        "  dangerousInsecureBackend: true\n  hooks:\n    - name: a\n      backend: https://app.default.svc/a\n",
    ));
    assert_mentions(
        &m,
        &["webhooks.dangerousInsecureBackend", "`app.default.svc`"],
    );
    accepted(&webhooks(
        "  dangerousInsecureBackend: true\n  hooks:\n    - name: a\n      backend: https://localhost:9443/a\n",
    ));
    let m = only_problem(&webhooks(
        "  certFile: /c.pem\n  hooks:\n    - name: a\n      backend: https://localhost:9443/a\n",
    ));
    assert_mentions(&m, &["webhooks:", "`certFile` and `keyFile` go together"]);
}

/// `issueFrom`: a certificate regroup issues from the app's CA files.
#[test]
fn webhooks_issue_from_the_apps_ca_alone_with_dns_names_and_no_registration() {
    let hook = "  hooks:\n    - name: a\n      backend: https://127.0.0.1:10250/a\n";
    let from = "  issueFrom:\n    caCertFile: /ca/tls.crt\n    caKeyFile: /ca/tls.key\n    dnsNames: [cm-webhook.cm.svc]\n";
    let s = accepted(&webhooks(&format!("{from}{hook}")));
    let w = s.file.webhooks.as_ref().unwrap();
    assert_eq!(
        w.issue_from.as_ref().unwrap().dns_names,
        ["cm-webhook.cm.svc"]
    );
    let m = only_problem(&webhooks(&format!(
        "  certFile: /c.pem\n  keyFile: /k.pem\n{from}{hook}"
    )));
    assert_mentions(&m, &["`certFile`/`keyFile` or `issueFrom`, not both"]);
    let m = only_problem(&webhooks(&format!(
        "  issueFrom:\n    caCertFile: /ca/tls.crt\n    caKeyFile: /ca/tls.key\n    dnsNames: []\n{hook}"
    )));
    assert_mentions(&m, &["webhooks.issueFrom.dnsNames", "list the names"]);
    let m = only_problem(&webhooks(&format!(
        "  issueFrom:\n    caCertFile: /ca/tls.crt\n    caKeyFile: /ca/tls.key\n    dnsNames: [Not_A_Name]\n{hook}"
    )));
    assert_mentions(&m, &["webhooks.issueFrom.dnsNames: `Not_A_Name`"]);
    let m = only_problem(&webhooks(&format!(
        "  reachAt:\n    url: https://127.0.0.1:9444\n{from}{hook}      registration:\n        url: https://127.0.0.1:10250/a\n"
    )));
    assert_mentions(&m, &["registration with `webhooks.issueFrom`"]);
}

#[test]
fn webhooks_are_reached_at_one_url_or_one_service() {
    let hook = "  hooks:\n    - name: a\n      backend: https://127.0.0.1:9443/a\n      registration:\n        url: https://127.0.0.1:9443/a\n";
    // A Service, as the chart configures it.
    accepted(&webhooks(&format!(
        "  reachAt:\n    service: {{namespace: team1, name: regroup-webhooks, port: 443}}\n{hook}"
    )));
    accepted(&webhooks(&format!(
        "  reachAt:\n    url: https://127.0.0.1:9444\n{hook}"
    )));
    let m = only_problem(&webhooks(&format!(
        "  reachAt:\n    url: https://127.0.0.1:9444\n    service: {{namespace: a, name: b}}\n{hook}"
    )));
    assert_mentions(&m, &["webhooks.reachAt", "exactly one of `url`, `service`"]);
    let m = only_problem(&webhooks(&format!("  reachAt: {{}}\n{hook}")));
    assert_mentions(&m, &["webhooks.reachAt", "exactly one of `url`, `service`"]);
}

// ------------------------------------------------------------ empty rules

#[test]
fn configuration_without_rules_is_rejected() {
    for yaml in [
        "",
        "   \n",
        "# nothing but a comment\n",
        "rules: []\n",
        "logging:\n  level: debug\n",
    ] {
        let m = only_problem(yaml);
        assert_mentions(&m, &["no rules", "`rules:`"]);
    }
}

#[test]
fn rules_key_without_a_list_is_rejected() {
    let m = only_problem("rules:\n");
    assert_mentions(&m, &["invalid configuration", "line 1"]);
}

// ---------------------------------------------------------- all at once

#[test]
fn every_problem_is_reported_at_once() {
    let p = problems(
        "rules:
  - from: Bad.example.io
    to: a.team1.example.com
  - from: apps
    to: apps.team1.example.com
listeners:
  http: 0.0.0.0:8001
",
    );
    assert_eq!(p.len(), 3, "{p:#?}");
    assert_mentions(&p[0], &["line 2: rule 1:", "`from: Bad.example.io`"]);
    assert_mentions(&p[1], &["line 4: rule 2:", "`from: apps`"]);
    assert_mentions(&p[2], &["listeners.http:"]);
}

const ONE_RULE: &str =
    "rules:\n  - from: samplecontroller.k8s.io\n    to: samplecontroller.team-b.example.com\n";

#[test]
fn without_names_the_registered_kinds_get_a_prefix_derived_from_the_rules() {
    let s = accepted(ONE_RULE);
    let n = s.map.object_names().expect("names on by default");
    assert!(n.is_derived());
    let cluster = n.to_cluster("auto.kopf.dev").unwrap();
    assert_eq!(cluster, "team-b-example-com-auto.kopf.dev");
    let kinds: Vec<&str> = n.kinds().iter().map(|k| k.kind).collect();
    assert_eq!(kinds, regroup_config::object_names::DEFAULT_KINDS);
    let table = s.effective_table();
    assert!(
        table.contains("NAMES  NAME -> team-b-example-com-NAME"),
        "{table}"
    );
    assert!(table.contains("derived from the rules"), "{table}");
    assert!(
        table.contains("`names.prefix: team-b-example-com-`"),
        "{table}"
    );
    // What a copy that ran with an earlier regroup pins to keep its objects.
    assert!(
        table.contains("`names.prefix: team-b-8286340e-`"),
        "{table}"
    );
    assert!(table.contains("SHARED"), "{table}");
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
}

#[test]
fn names_without_prefix_or_kinds_take_the_defaults_and_kinds_empty_turns_them_off() {
    // A prefix alone: the default kinds.
    let s = accepted(&format!("{ONE_RULE}names:\n  prefix: b-\n"));
    let n = s.map.object_names().unwrap();
    assert!(!n.is_derived());
    assert_eq!(
        n.kinds().len(),
        regroup_config::object_names::DEFAULT_KINDS.len()
    );
    assert_eq!(n.to_cluster("x").as_deref(), Some("b-x"));
    // Kinds alone: the derived prefix, on those kinds only, and a warning
    // for the registered kinds left shared.
    let s = accepted(&format!(
        "{ONE_RULE}names:\n  kinds: [ClusterRole]\n  keep: [r]\n"
    ));
    let n = s.map.object_names().unwrap();
    assert!(n.is_derived() && n.is_kept("r"));
    let w = s.warnings().join("\n");
    assert_mentions(
        &w,
        &["ValidatingWebhookConfiguration", "shared", "overwrites"],
    );
    assert!(!w.contains("ClusterRole,"), "{w}");
    // `kinds: []`: nothing renamed, and said so.
    let s = accepted(&format!("{ONE_RULE}names:\n  kinds: []\n"));
    assert!(s.map.object_names().is_none());
    let w = s.warnings().join("\n");
    assert_mentions(
        &w,
        &[
            "names.kinds: []",
            "ClusterRoleBinding",
            "MutatingAdmissionPolicyBinding",
            "overwrites",
        ],
    );
}

#[test]
fn short_name_prefix_problems_name_the_line_of_names() {
    let base = "rules:\n  - {from: a.example.io, to: a.t1.example.com}\n";
    let p = only_problem(&format!("{base}names:\n  shortNamePrefix: 1t-\n"));
    assert_mentions(
        &p,
        &[
            "line 4",
            "names.shortNamePrefix",
            "`1t-`",
            "lower-case letter",
        ],
    );
    let p = only_problem(&format!(
        "{base}names:\n  shortNamePrefix: t1-\n  keepCategories: [all, t1-x]\n"
    ));
    assert_mentions(&p, &["line 4", "`t1-x`", "starts with"]);
    let p = only_problem(&format!("{base}names:\n  keepCategories: [all]\n"));
    assert_mentions(&p, &["line 4", "needs names.shortNamePrefix"]);
    let s = accepted(&format!("{base}names:\n  shortNamePrefix: t1-\n"));
    let short = s.map.short_names().expect("configured");
    assert_eq!(short.prefix(), "t1-");
    assert_eq!(short.kept_categories(), ["all"]);
    assert!(
        s.effective_table().contains("NAME -> t1-NAME"),
        "{}",
        s.effective_table()
    );
    // Without it nothing is renamed.
    assert!(accepted(base).map.short_names().is_none());
}

/// A valid publish-mode configuration, with `extra` under `publish:`.
fn publish_yaml(extra: &str) -> String {
    format!(
        "front:\n  listen: 0.0.0.0:9443\n  requestHeader: {{fromCluster: true}}\npublish:\n  central: {{kubeconfig: /etc/central}}\n  groups: [database.acmeco.org]\n  targetNamespace: bar\n{extra}"
    )
}

#[test]
fn publish_credentials_read_only_and_the_lease_are_accepted() {
    let s = accepted(&publish_yaml(
        "  credentials:\n    defaultSecret: {namespace: regroup, name: agent1-creds}\n  readOnly: true\n  leaderElection: {namespace: regroup, name: copier, leaseSeconds: 20}\n",
    ));
    let p = s.file.publish.as_ref().unwrap();
    let d = p.credentials.default_secret.as_ref().unwrap();
    assert_eq!(
        (d.namespace.as_str(), d.name.as_str()),
        ("regroup", "agent1-creds")
    );
    assert!(p.read_only);
    assert_eq!(p.leader_election.lease_seconds, 20);
    let defaults = accepted(&publish_yaml(""));
    let p = defaults.file.publish.as_ref().unwrap();
    assert!(p.credentials.default_secret.is_none() && !p.read_only);
    assert_eq!(p.leader_election.lease_seconds, 15);
}

#[test]
fn a_default_secret_that_is_not_a_name_and_a_short_lease_are_refused() {
    let m = only_problem(&publish_yaml(
        "  credentials:\n    defaultSecret: {namespace: Regroup, name: a/b}\n",
    ));
    assert_mentions(&m, &["publish.credentials.defaultSecret", "Regroup/a/b"]);
    let m = only_problem(&publish_yaml("  leaderElection: {leaseSeconds: 1}\n"));
    assert_mentions(&m, &["publish.leaderElection.leaseSeconds", "at least 3"]);
}
