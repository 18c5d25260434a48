//! Whether a file changed, without reading it: what the certificate and
//! credential files regroup reloads are checked by (the upstream's CA and
//! token files, the serving certificates, the app's CA).

use std::time::SystemTime;

/// A file's modification time, size and inode (none: unreadable).
pub type FileStamp = Option<(SystemTime, u64, u64)>;

/// The [`FileStamp`] of `path` now (following symlinks, as a projected
/// volume's `..data` swap needs).
pub fn file_stamp(path: &std::path::Path) -> FileStamp {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.modified().ok()?, m.len(), ino))
}
