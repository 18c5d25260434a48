//! The JSON renaming walk alone, for callgrind: renames the captured
//! 921-byte Foo GET (`testdata/kube-1.24/renamed/027-get-foo-json`) `N`
//! times through `Engine::body`, as the proxy's `pipeline/whole.rs` does for a
//! GET of a Foo (direction to the app, the addressed group and kind).
//!
//!   json_walk N [BODY] [GROUP KIND]
//!
//! With `JSON_WALK_NAMES` set, the rules have `names:` with its default
//! kinds (the search for those kinds then runs on every body).
//! `JSON_WALK_RULE=FROM=TO` maps another group than the default
//! `samplecontroller.k8s.io=samplecontroller.team1.example.com` (a rule
//! whose names the body lacks measures the pre-check alone).
//!
//! `bench/json_walk.sh` runs it twice under callgrind and prints
//! instructions per byte: (count(N2) - count(N1)) / ((N2 - N1) * bytes).
//! Every iteration's output is checked against the first (its length;
//! the last one byte for byte), so a walk that stopped renaming would
//! fail here rather than look fast.

use std::hint::black_box;

use regroup_config::{Direction, GroupMap, MapRule, ObjectNames, Rule};
use regroup_core::kube::Wire;
use regroup_core::rewrite::{Catalog, Context, Engine};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: json_walk N [BODY] [GROUP KIND]");
    let path = args.next().unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/kube-1.24/renamed/027-get-foo-json/response.body"
        )
        .to_owned()
    });
    let group = args
        .next()
        .unwrap_or_else(|| "samplecontroller.k8s.io".into());
    let kind = args.next().unwrap_or_else(|| "Foo".into());
    let body = std::fs::read(&path).expect("the body");
    let rule = std::env::var("JSON_WALK_RULE")
        .unwrap_or_else(|_| "samplecontroller.k8s.io=samplecontroller.team1.example.com".into());
    let (from, to) = rule.split_once('=').expect("JSON_WALK_RULE=FROM=TO");
    let map = GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: from.into(),
            to: to.into(),
        },
        reference_keys: true,
    }])
    .expect("rules");
    // JSON_WALK_NAMES=1: `names:` with its default kinds, as `regroup
    // serve` has it unless configured off (their search runs on every
    // body).
    let map = match std::env::var_os("JSON_WALK_NAMES") {
        Some(_) => {
            let names = ObjectNames::new(Some("team1-"), None, &ObjectNames::default_kinds(), &[])
                .expect("names");
            map.with_object_names(Some(names))
        }
        None => map,
    };
    let catalog = Catalog::for_map(&[], &map);
    let engine = Engine::new(map, catalog);
    let cx = Context {
        hint: None,
        addressed: Some((&group, &kind)),
    };
    let rename = |b: &[u8]| {
        engine
            .body(Direction::ToApp, Wire::Json, cx, b)
            .expect("renames")
    };
    let first = rename(&body);
    let first_len = first.as_ref().map(Vec::len);
    let mut changed = 0usize;
    for i in 0..n {
        let out = rename(black_box(&body));
        // Every output's length, and the last one whole: comparing every
        // output byte for byte cost ~150 instructions an iteration on the
        // Foo and ~300 on the Deployment, counted as the walk's before
        // session 28 (the walk is deterministic: the last output stands
        // for the others).
        assert_eq!(
            out.as_ref().map(Vec::len),
            first_len,
            "every iteration renames the same"
        );
        if i + 1 == n {
            assert_eq!(out, first, "every iteration renames the same");
        }
        changed += usize::from(out.is_some());
        black_box(out);
    }
    println!("{n} renames of {} bytes, {changed} changed", body.len());
}
