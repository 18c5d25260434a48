use super::*;
use serde_json::json;

#[test]
fn malformed_patches_are_kube_apiservers_statuses() {
    let code = |body: &[u8]| parse(body).map(|_| ()).unwrap_err().code.as_u16();
    assert_eq!(code(b"{not json"), 400);
    assert_eq!(code(br#"{"op":"add"}"#), 400);
    assert_eq!(code(br#"["add"]"#), 400);
    assert_eq!(code(br#"[{"op":"frobnicate","path":"/a"}]"#), 422);
    assert_eq!(code(br#"[{"op":"add","path":"no-slash","value":1}]"#), 422);
    assert_eq!(code(br#"[{"op":"add"}]"#), 422);
    let many = format!(
        "[{}]",
        vec![r#"{"op":"remove","path":"/a"}"#; 10_001].join(",")
    );
    assert_eq!(code(many.as_bytes()), 413);
    // The message never quotes the body.
    let f = parse(br#"["SECRET-BUNDLE"]"#).unwrap_err();
    assert!(!f.message.contains("SECRET"), "{}", f.message);
    assert!(parse(b"null").unwrap().is_empty());
    assert_eq!(
        parse(br#"[{"op":"test","path":"/spec/caBundle","value":"QQ=="}]"#)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_patch_applies_all_or_fails_with_422() {
    let doc = json!({"metadata": {"name": "a"}, "spec": {"caBundle": "T0xE"}});
    let ops = parse(
        br#"[{"op":"test","path":"/spec/caBundle","value":"T0xE"},
                 {"op":"replace","path":"/spec/caBundle","value":"TkVX"}]"#,
    )
    .unwrap();
    let out = apply(doc.clone(), &ops).unwrap();
    assert_eq!(out["spec"]["caBundle"], "TkVX");
    let failing = parse(
        br#"[{"op":"replace","path":"/spec/caBundle","value":"TkVX"},
                 {"op":"test","path":"/spec/caBundle","value":"T0xE"}]"#,
    )
    .unwrap();
    let f = apply(doc.clone(), &failing).unwrap_err();
    assert_eq!((f.code.as_u16(), f.reason), (422, "Invalid"));
    let missing = parse(br#"[{"op":"replace","path":"/spec/nothing/here","value":1}]"#).unwrap();
    assert_eq!(apply(doc, &missing).unwrap_err().code.as_u16(), 422);
}

#[test]
fn the_write_is_conditional_on_the_version_read_unless_the_patch_names_one() {
    let mut patched = json!({"metadata": {"name": "a", "resourceVersion": "7"}});
    assert!(!pin_resource_version(&mut patched, Some("7")));
    assert_eq!(patched["metadata"]["resourceVersion"], "7");
    // Removed by the patch: still conditional on what was read.
    let mut removed = json!({"metadata": {"name": "a"}});
    assert!(!pin_resource_version(&mut removed, Some("7")));
    assert_eq!(removed["metadata"]["resourceVersion"], "7");
    // Replaced by the patch: the app's precondition stands.
    let mut asked = json!({"metadata": {"name": "a", "resourceVersion": "5"}});
    assert!(pin_resource_version(&mut asked, Some("7")));
    assert_eq!(asked["metadata"]["resourceVersion"], "5");
    // Metadata replaced by something else: left to the server to refuse.
    let mut odd = json!({"metadata": 3});
    assert!(!pin_resource_version(&mut odd, Some("7")));
    assert_eq!(odd["metadata"], 3);
}

#[test]
fn the_update_keeps_the_options_an_update_takes() {
    assert_eq!(update_query(None), None);
    assert_eq!(update_query(Some("pretty=true")), None);
    assert_eq!(
        update_query(Some(
            "dryRun=All&force=true&fieldManager=rotator&fieldValidation=Strict&timeout=5s"
        ))
        .as_deref(),
        Some("dryRun=All&fieldManager=rotator&fieldValidation=Strict")
    );
}

#[test]
fn the_patch_is_conditional_on_the_version_read_unless_it_names_one() {
    let mut p = serde_json::json!({"webhooks": []});
    assert!(!pin_precondition(&mut p, Some("7")));
    assert_eq!(p["metadata"]["resourceVersion"], "7");
    let mut asked = serde_json::json!({"metadata": {"resourceVersion": "5"}});
    assert!(pin_precondition(&mut asked, Some("7")));
    assert_eq!(asked["metadata"]["resourceVersion"], "5");
    let mut same = serde_json::json!({"metadata": {"resourceVersion": "7"}});
    assert!(!pin_precondition(&mut same, Some("7")));
}
