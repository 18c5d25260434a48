//! The `Status` document kube-apiserver answers errors with.

/// A `Status` failure as kube-apiserver writes it: `code` is the HTTP status,
/// `reason` its `StatusReason` (`BadRequest`, `ServiceUnavailable`, ...).
pub fn failure_json(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
    .to_string()
}

/// A watch `ERROR` event carrying a `Status` (one line of a JSON watch).
pub fn watch_error_line(code: u16, reason: &str, message: &str) -> String {
    format!(
        "{{\"type\":\"ERROR\",\"object\":{}}}\n",
        failure_json(code, reason, message)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_error_is_one_line_of_an_error_event() {
        let line = watch_error_line(502, "InternalError", "x");
        assert!(line.ends_with("}\n") && !line[..line.len() - 1].contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "ERROR");
        assert_eq!(v["object"]["kind"], "Status");
        assert_eq!(v["object"]["code"], 502);
        assert_eq!(v["object"]["message"], "x");
    }
}
