//! TLS for the sidecar listener: certificate files, or a CA and serving
//! certificate generated at start for 127.0.0.1/localhost, the CA written
//! where a projected service-account volume can carry it as `ca.crt`.

use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use rustls::ServerConfig;

use super::pem_file::{read_text, FileError};
use super::tls_error::{certificates, TlsPartError};

/// Why a TLS identity or server configuration can't be had.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file can't be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// rcgen could not make the CA or the certificate.
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// The serving certificate or key can't be used, or the crypto
    /// provider refused the protocol versions.
    #[error(transparent)]
    Part(#[from] TlsPartError),
}

/// A certificate chain and its key, PEM.
pub struct Identity {
    /// PEM certificate chain (leaf first).
    pub cert_pem: String,
    /// PEM private key.
    pub key_pem: String,
    /// PEM of the CA that signed it, when regroup generated it.
    pub ca_pem: Option<String>,
}

/// Reads a certificate and key from files.
pub fn from_files(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
    Ok(Identity {
        cert_pem: read_text(cert)?,
        key_pem: read_text(key)?,
        ca_pem: None,
    })
}

/// Generates a CA and a serving certificate for 127.0.0.1, ::1,
/// localhost and `extra_names` (rcgen's default validity: they live as long as the process
/// that generated them, and are generated anew at each start).
pub fn generate() -> Result<Identity, TlsError> {
    generate_for("regroup sidecar CA", &[], false)
}

/// Generates a CA and a certificate signed by it: a serving certificate for
/// the loopback names and `extra_names`, or (`client`) a client certificate
/// whose CN is `extra_names[0]`.
pub fn generate_for(
    ca_name: &str,
    extra_names: &[String],
    client: bool,
) -> Result<Identity, TlsError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let leaf = if client {
        let mut p = CertificateParams::new(Vec::<String>::new())?;
        let cn = extra_names
            .first()
            .cloned()
            .unwrap_or_else(|| "regroup".into());
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        p
    } else {
        let mut names = vec![
            "127.0.0.1".to_string(),
            "::1".to_string(),
            "localhost".to_string(),
        ];
        names.extend(extra_names.iter().cloned());
        let mut p = CertificateParams::new(names)?;
        p.distinguished_name.push(DnType::CommonName, "regroup");
        p
    };
    let key = KeyPair::generate()?;
    let cert = leaf.signed_by(&key, &ca)?;
    Ok(Identity {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        ca_pem: Some(ca.pem()),
    })
}

/// A rustls server configuration offering h2 and http/1.1.
pub fn server_config(id: &Identity) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = certificates(id.cert_pem.as_bytes(), "serving certificate")?;
    let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes())
        .map_err(TlsPartError::pem("serving key"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsPartError::versions)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(TlsPartError::refused("serving certificate"))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
