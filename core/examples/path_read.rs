//! A request path read as the proxy reads it on every request, for
//! callgrind: `RequestInfo::parse`, then `rewrite_path_for` with one rule,
//! `N` times.
//!
//!   path_read N [PATH] [FROM=TO]
//!
//! `bench/path_read.sh` runs it twice under callgrind and prints
//! instructions per read: (count(N2) - count(N1)) / (N2 - N1). The default
//! path is `bench/instructions.sh`'s GET of the Foo in the cluster's
//! names, the default rule one for another group (its no-name case: the
//! path is read, nothing renamed). Each read's answer is compared with the
//! first, so a reader that stopped reading would fail here.

use std::hint::black_box;

use regroup_config::{Direction, GroupMap, MapRule, Rule};
use regroup_core::kube::request::RequestInfo;
use regroup_core::url_rename::rewrite_path_for;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: path_read N [PATH] [FROM=TO]");
    let path = args.next().unwrap_or_else(|| {
        "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/renamed/foos/alpha".into()
    });
    let rule = args
        .next()
        .unwrap_or_else(|| "other.example.io=other.team1.example.com".into());
    let (from, to) = rule.split_once('=').expect("FROM=TO");
    let map = GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: from.into(),
            to: to.into(),
        },
        reference_keys: true,
    }])
    .expect("rules");
    let read = |p: &str| {
        let info = RequestInfo::parse(p, None);
        let renamed = rewrite_path_for(p, &info, &map, Direction::ToCluster);
        (info, renamed)
    };
    let first = read(&path);
    for _ in 0..n {
        let got = read(black_box(&path));
        assert!(got == first, "every read is the same");
        black_box(got);
    }
    println!(
        "{n} reads of {path}: group {:?}, resource {:?}, renamed {:?}",
        first.0.group, first.0.resource, first.1
    );
}
