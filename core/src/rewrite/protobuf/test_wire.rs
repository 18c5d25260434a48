//! Protobuf wire-format builders for tests: bytes written by hand from
//! Kubernetes' field numbers, independently of regroup's descriptors.
//! Shared by the unit tests (`rewrite::protobuf::tests`) and, through the
//! feature `test-support`, by the proxy crate's tests.
#![allow(dead_code)] // each user takes what it needs

/// The `k8s\0` prefix of Kubernetes' protobuf envelope.
pub const MAGIC: &[u8] = b"k8s\0";

pub fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// A field's key: its number and wire type.
pub fn key(n: u32, wire: u64) -> Vec<u8> {
    varint(u64::from(n) << 3 | wire)
}

/// A length-delimited field.
pub fn ld(n: u32, value: impl AsRef<[u8]>) -> Vec<u8> {
    let value = value.as_ref();
    let mut out = key(n, 2);
    out.extend(varint(value.len() as u64));
    out.extend_from_slice(value);
    out
}

/// A varint field.
pub fn vi(n: u32, v: u64) -> Vec<u8> {
    let mut out = key(n, 0);
    out.extend(varint(v));
    out
}

pub fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// `k8s\0` + runtime.Unknown{typeMeta=1{apiVersion=1, kind=2}, raw=2,
/// contentEncoding=3, contentType=4}.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend(cat(&[
        ld(1, cat(&[ld(1, api_version), ld(2, kind)])),
        ld(2, raw),
        ld(3, ""),
        ld(4, ""),
    ]));
    out
}
