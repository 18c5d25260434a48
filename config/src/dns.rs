//! DNS-1123 names and label-boundary suffixes, as Kubernetes validates them.

/// Maximum length of a DNS-1123 subdomain (and so of a group or a CRD name).
pub const MAX_SUBDOMAIN: usize = 253;
/// Maximum length of one DNS label.
pub const MAX_LABEL: usize = 63;

/// Why a string is not a DNS-1123 subdomain, or `None` if it is one.
pub fn subdomain_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("must not be empty".into());
    }
    if s.len() > MAX_SUBDOMAIN {
        return Some(format!(
            "must be no more than {MAX_SUBDOMAIN} characters (has {})",
            s.len()
        ));
    }
    for label in s.split('.') {
        if label.is_empty() {
            return Some("must not contain empty labels (`..`, leading or trailing `.`)".into());
        }
        if label.len() > MAX_LABEL {
            return Some(format!(
                "label `{label}` must be no more than {MAX_LABEL} characters"
            ));
        }
        let ok_chars = label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        let b = label.as_bytes();
        let ok_ends = b[0].is_ascii_alphanumeric() && b[b.len() - 1].is_ascii_alphanumeric();
        if !ok_chars || !ok_ends {
            return Some(format!(
                "label `{label}` must consist of lower case alphanumeric characters or '-', \
                 and must start and end with an alphanumeric character"
            ));
        }
    }
    None
}

/// True when `name` equals `suffix` or ends with `.suffix`: a suffix match on
/// a label boundary (`login.pinniped.dev` is under `pinniped.dev`,
/// `xpinniped.dev` is not).
pub fn has_label_suffix(name: &str, suffix: &str) -> bool {
    match name.strip_suffix(suffix) {
        Some("") => true,
        Some(head) => head.ends_with('.'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_follow_dns_1123() {
        assert_eq!(subdomain_problem("samplecontroller.k8s.io"), None);
        assert_eq!(subdomain_problem("a-b.c0"), None);
        assert!(subdomain_problem("").is_some());
        assert!(subdomain_problem("Upper.example.com").is_some());
        assert!(subdomain_problem("-lead.example.com").is_some());
        assert!(subdomain_problem("a..b").is_some());
        assert!(subdomain_problem("under_score.io").is_some());
        assert!(subdomain_problem(&"a".repeat(64)).is_some());
        let long = vec!["a".repeat(60); 5].join(".");
        assert!(subdomain_problem(&long).unwrap().contains("253"));
    }

    #[test]
    fn label_suffix_requires_a_boundary() {
        assert!(has_label_suffix("login.pinniped.dev", "pinniped.dev"));
        assert!(has_label_suffix("pinniped.dev", "pinniped.dev"));
        assert!(!has_label_suffix("xpinniped.dev", "pinniped.dev"));
        assert!(!has_label_suffix("dev", "pinniped.dev"));
    }
}
