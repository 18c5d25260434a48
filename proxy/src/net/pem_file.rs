//! The certificate and key files a setting names, read: one error for
//! every TLS room, its message naming the file.

use std::path::{Path, PathBuf};

/// Why a certificate or key file can't be had.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file can't be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not PEM.
    #[error("{}: {source}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls::pki_types::pem::Error,
    },
}

/// The file's bytes.
pub fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    std::fs::read(path).map_err(|source| FileError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The file's text.
pub fn read_text(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|source| FileError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The error of `path`'s PEM not parsing.
pub fn not_pem(path: &Path) -> impl FnOnce(rustls::pki_types::pem::Error) -> FileError {
    let path = path.to_path_buf();
    move |source| FileError::Pem { path, source }
}
