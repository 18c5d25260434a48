//! What a webhook call is about, read from its JSON: an AdmissionReview
//! (`admission.k8s.io/v1` or `v1beta1`) or a ConversionReview
//! (`apiextensions.k8s.io/v1` or `v1beta1`), its `uid`, and for admission
//! the group and kind of the reviewed object (whose JSON Patch the answer
//! may carry). And what the app's answer says: refused or not.

use serde::Deserialize;

/// The kinds of review a webhook is called with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewKind {
    /// Validating or mutating admission.
    Admission,
    /// CRD conversion.
    Conversion,
}

impl ReviewKind {
    /// The kind's name, for metrics and logs.
    pub fn name(self) -> &'static str {
        match self {
            ReviewKind::Admission => "AdmissionReview",
            ReviewKind::Conversion => "ConversionReview",
        }
    }
}

/// A review as sent by kube-apiserver (only what regroup needs of it).
#[derive(Debug)]
pub struct Review {
    /// Which review.
    pub kind: ReviewKind,
    /// Its `apiVersion`: an answer that omits its own is read as this.
    pub api_version: String,
    /// `request.uid`: the answer must carry it.
    pub uid: String,
    /// Admission: the reviewed object's group and kind (`request.kind`).
    pub target: Option<(String, String)>,
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<Request>,
}

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    uid: String,
    kind: Option<Gvk>,
}

#[derive(Deserialize)]
struct Gvk {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
}

/// Why a review (or the app's answer to one) can't be read.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON of a review's shape.
    #[error("not a JSON review: {0}")]
    NotJson(#[source] serde_json::Error),
    /// Another kind of document.
    #[error("expected an AdmissionReview or ConversionReview, got `{api_version}` `{kind}`")]
    Kind {
        /// Its `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
    /// A review without `request`.
    #[error("the review has no `request`")]
    NoRequest,
    /// A request without `uid`.
    #[error("the review's request has no `uid`")]
    NoUid,
    /// An answer without `response`.
    #[error("the answer has no `response`")]
    NoResponse,
    /// An answer to another review.
    #[error("the answer's `response.uid` is not the review's")]
    OtherUid,
}

impl Review {
    /// Reads a review; an error says why it isn't one (never quoting it).
    pub fn read(body: &[u8]) -> Result<Review, ReviewError> {
        let head: Head = serde_json::from_slice(body).map_err(ReviewError::NotJson)?;
        let kind = match (head.api_version.as_str(), head.kind.as_str()) {
            ("admission.k8s.io/v1" | "admission.k8s.io/v1beta1", "AdmissionReview") => {
                ReviewKind::Admission
            }
            ("apiextensions.k8s.io/v1" | "apiextensions.k8s.io/v1beta1", "ConversionReview") => {
                ReviewKind::Conversion
            }
            (v, k) => {
                return Err(ReviewError::Kind {
                    api_version: v.to_owned(),
                    kind: k.to_owned(),
                })
            }
        };
        let request = head.request.ok_or(ReviewError::NoRequest)?;
        if request.uid.is_empty() {
            return Err(ReviewError::NoUid);
        }
        let target = match kind {
            ReviewKind::Admission => request.kind.map(|k| (k.group, k.kind)),
            ReviewKind::Conversion => None,
        };
        Ok(Review {
            kind,
            api_version: head.api_version,
            uid: request.uid,
            target,
        })
    }
}

#[derive(Deserialize)]
struct AnswerHead {
    response: Option<Response>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    uid: String,
    allowed: Option<bool>,
    result: Option<Outcome>,
}

#[derive(Deserialize)]
struct Outcome {
    #[serde(default)]
    status: String,
}

/// What the app answered.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    /// Admission not allowed, or a conversion that failed.
    pub refused: bool,
}

impl Answer {
    /// Reads the app's answer to `review`: it must be JSON with a
    /// `response` for the review's `uid`.
    pub fn read(body: &[u8], review: &Review) -> Result<Answer, ReviewError> {
        let head: AnswerHead = serde_json::from_slice(body).map_err(ReviewError::NotJson)?;
        let r = head.response.ok_or(ReviewError::NoResponse)?;
        if r.uid != review.uid {
            return Err(ReviewError::OtherUid);
        }
        let refused = match review.kind {
            ReviewKind::Admission => r.allowed != Some(true),
            ReviewKind::Conversion => r.result.is_some_and(|o| o.status != "Success"),
        };
        Ok(Answer { refused })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_are_told_apart_and_others_refused() {
        let a = Review::read(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"g","version":"v1","kind":"Foo"}}}"#).unwrap();
        assert_eq!(a.kind, ReviewKind::Admission);
        assert_eq!(a.target, Some(("g".into(), "Foo".into())));
        let c = Review::read(br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","desiredAPIVersion":"g/v2","objects":[]}}"#).unwrap();
        assert_eq!((c.kind, c.target), (ReviewKind::Conversion, None));
        for bad in [
            &br#"{"apiVersion":"v1","kind":"ConfigMap"}"#[..],
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#,
            b"not json",
        ] {
            assert!(Review::read(bad).is_err());
        }
    }

    #[test]
    fn an_answer_for_another_uid_is_refused() {
        let r = Review::read(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}"#).unwrap();
        let ok = Answer::read(br#"{"response":{"uid":"u","allowed":false}}"#, &r).unwrap();
        assert!(ok.refused);
        assert!(Answer::read(br#"{"response":{"uid":"x","allowed":true}}"#, &r).is_err());
        assert!(Answer::read(br#"{"kind":"AdmissionReview"}"#, &r).is_err());
    }
}
