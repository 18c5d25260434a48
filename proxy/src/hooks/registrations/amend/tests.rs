use super::*;

fn op(json: &str) -> PatchOperation {
    serde_json::from_str(json).unwrap()
}

#[test]
fn json_patches_that_reach_a_client_config_are_read_modify_written() {
    let reaching = [
        r#"{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"QQ=="}"#,
        r#"{"op":"replace","path":"/webhooks/0/clientConfig","value":{}}"#,
        r#"{"op":"add","path":"/webhooks/-","value":{}}"#,
        r#"{"op":"remove","path":"/webhooks/1"}"#,
        r#"{"op":"replace","path":"/webhooks","value":[]}"#,
        r#"{"op":"replace","path":"/spec/conversion/webhook/clientConfig/url","value":"x"}"#,
        r#"{"op":"replace","path":"/spec","value":{}}"#,
        r#"{"op":"remove","path":"/metadata/annotations"}"#,
        r#"{"op":"test","path":"/webhooks/0/clientConfig/url","value":"x"}"#,
        r#"{"op":"copy","from":"/webhooks/0/clientConfig","path":"/x"}"#,
        r#"{"op":"replace","path":"","value":{}}"#,
    ];
    for o in reaching {
        assert!(touches_client_configs(&op(o)), "{o}");
    }
    let elsewhere = [
        r#"{"op":"replace","path":"/webhooks/0/rules/0/apiGroups/0","value":"a"}"#,
        r#"{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}"#,
        r#"{"op":"add","path":"/metadata/labels/a","value":"b"}"#,
        r#"{"op":"replace","path":"/spec/versions/0/served","value":true}"#,
    ];
    for o in elsewhere {
        assert!(!touches_client_configs(&op(o)), "{o}");
    }
}
