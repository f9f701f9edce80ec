//! `pir-fs`: replace a file atomically and durably.
//!
//! [`write_atomic`] writes a temporary file beside the target (same directory, so the rename
//! cannot cross file systems), syncs it, renames it over the target, and syncs the directory
//! so the rename itself survives a crash. A reader sees the old file or the new one, never a
//! part; after a crash the target is the old file or the new one, and at worst a
//! `.NAME.partial-*` file is left beside it. On any error the temporary file is removed.
//!
//! Used for every file `pir` replaces: databases, the QDP seed state, fetched files, the hint
//! cache. What it does not do: create files that must never be overwritten (key files open
//! with `create_new` instead), or locking between processes.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files of concurrent writers in one process.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` with what `fill` writes, atomically and durably (see the crate docs).
/// Errors name the file that failed.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    write_atomic_mode(path, false, fill)
}

/// [`write_atomic_bytes`] of a secret: the file is readable by the owner only (mode 0600 on
/// Unix) from the moment it exists (a client's Checklist sets, for example).
pub fn write_atomic_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_mode(path, true, |out| out.write_all(bytes))
}

fn write_atomic_mode(
    path: &Path,
    private: bool,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let dir = directory_of(path);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))
        .map_err(|e| at(path, e))?
        .to_string_lossy()
        .into_owned();
    let (temp, file) = create_temp(&dir, &name, private)?;
    let result = (|| {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        fill(&mut out).map_err(|e| at(&temp, e))?;
        let file = out.into_inner().map_err(|e| at(&temp, e.into_error()))?;
        file.sync_all().map_err(|e| at(&temp, e))?;
        drop(file);
        std::fs::rename(&temp, path).map_err(|e| at(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
        return result;
    }
    // The rename is durable once the directory is synced; not every platform can open a
    // directory, so this step is best effort.
    if let Ok(d) = File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Replaces `path` with `bytes` ([`write_atomic`]).
pub fn write_atomic_bytes(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic(path, |out| out.write_all(bytes))
}

fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn create_temp(dir: &Path, name: &str, private: bool) -> io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{name}.partial-{pid}-{n}"));
        match options.open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(at(&temp, e)),
        }
    }
}

/// `error`, with the path it concerns in its message.
fn at(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// Creates `path` with `bytes`, readable by the owner only (mode 0600 on Unix), and syncs
/// it. Never overwrites: an existing file is an error (secret keys are written this way).
pub fn write_new_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(|e| at(path, e))?;
    file.write_all(bytes).map_err(|e| at(path, e))?;
    file.sync_all().map_err(|e| at(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_files_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        write_atomic_bytes(&path, b"first").unwrap();
        write_atomic_bytes(&path, b"second, longer").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second, longer");
        let failed = write_atomic(&path, |out| {
            out.write_all(b"partial")?;
            Err(io::Error::other("disk full"))
        });
        assert!(failed.unwrap_err().to_string().contains("disk full"));
        assert_eq!(std::fs::read(&path).unwrap(), b"second, longer");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left");
        let missing = dir.path().join("no/such/dir/file");
        let error = write_atomic_bytes(&missing, b"x").unwrap_err();
        assert!(error.to_string().contains("no/such/dir"), "{error}");
    }
}
