#[test]
fn scratch() {
    for y in [
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
"rules:
  - from: a.io
    to: b.io
    bogus: 1
",
"rules:
  - from: a.io
    to: b.io
bogus: 1
",
"# comment

rules:
  - from: a.io
    to: b.io

  - from: c.io
    to: b.io
",
"rules:
  - from: a.io
    to: b.io
  - from: a.io
    to: b.io
",
"rules:
  - fromSuffix: concierge.pinniped.dev
    toSuffix: concierge.team2.example.com
  - fromSuffix: pinniped.dev
    toSuffix: team1.example.com
",
"rules:
  - from: a.io
    to: b.io
fields:
  - group: a.io
    kind: Foo
    path: spec.x
    form: plural
",
"rules:
  - {from: a.io, to: b.io}
listeners:
  http: 0.0.0.0:8080
",
"rules: [{from: a.io, to: b.io}]
listeners:
  http: localhost:8080
",
    ] {
        match regroup_config::load(y) {
            Ok(s) => println!("OK\n{}", s.effective_table()),
            Err(e) => println!("ERR\n{e}\n{:?}", e.problems),
        }
        println!("-----");
    }
}
