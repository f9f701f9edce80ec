//! `pir-fs`: replace a file atomically and durably.
//!
//! [`write_atomic`] writes a temporary file beside the target (same directory, so the rename
//! cannot cross file systems), syncs it, renames it over the target, and syncs the directory
//! so the rename itself survives a crash. A reader sees the old file or the new one, never a
//! part; after a crash the target is the old file or the new one, and at worst a
//! `.NAME.partial-*` file is left beside it. On any error the temporary file is removed.
//!
//! [`write_atomic_private`] does the same for secrets (mode 0600 from the moment the file
//! exists), and [`write_new_private`] creates a file that must never be overwritten (secret
//! keys) the same way, linking the synced temporary file to its name instead of renaming it.
//!
//! Used for every file `pir` writes: databases, the QDP seed state, fetched files, the hint
//! cache, keys, mirror lists, servers files, evidence. [`PathError`] is the I/O error that
//! names its file, the `Io` case of the error types of the crates that read and write them.
//! What it does not do: locking between processes.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// An I/O error and the file or directory it concerns, shown as `PATH: ERROR`; its
/// [`source`](std::error::Error::source) is the operating system's error.
#[derive(Debug)]
pub struct PathError {
    /// The file or directory (or, for an in-memory reader, what it stands for).
    pub path: String,
    /// What the operating system said.
    pub source: io::Error,
}

impl PathError {
    /// `source`, which happened to `path`.
    pub fn new(path: &Path, source: io::Error) -> Self {
        PathError {
            path: path.display().to_string(),
            source,
        }
    }

    /// A closure that turns an I/O error into a [`PathError`] for `path`, for `map_err`.
    pub fn at(path: &Path) -> impl Fn(io::Error) -> Self + '_ {
        move |source| Self::new(path, source)
    }
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.source)
    }
}

impl std::error::Error for PathError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

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
    let (dir, temp) = write_temp(path, private, fill)?;
    if let Err(e) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(at(path, e));
    }
    sync_directory(&dir);
    Ok(())
}

/// Writes what `fill` writes to a new temporary file beside `path` and syncs it; returns the
/// directory and the temporary file. On any error the temporary file is removed.
fn write_temp(
    path: &Path,
    private: bool,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<(PathBuf, PathBuf)> {
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
        file.sync_all().map_err(|e| at(&temp, e))
    })();
    match result {
        Ok(()) => Ok((dir, temp)),
        Err(e) => {
            let _ = std::fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// The rename (or link) into `dir` is durable once the directory is synced; not every
/// platform can open a directory, so this step is best effort.
fn sync_directory(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
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

/// Creates `path` with `bytes`, readable by the owner only (mode 0600 on Unix), durably and
/// atomically. Never overwrites: an existing file is an error of kind `AlreadyExists` (secret
/// keys are written this way). Like [`write_atomic`], the bytes go to a synced temporary file
/// first, which is then linked to `path` (a link, unlike a rename, fails if `path` exists): a
/// full disk leaves no empty or partial `path` behind, so the same command can be run again.
pub fn write_new_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_new_mode(path, true, |out| out.write_all(bytes))
}

fn write_new_mode(
    path: &Path,
    private: bool,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    if path.symlink_metadata().is_ok() {
        return Err(at(path, io::ErrorKind::AlreadyExists.into()));
    }
    let (dir, temp) = write_temp(path, private, fill)?;
    let linked = match std::fs::hard_link(&temp, path) {
        // A file system without links (some network and FAT mounts): rename, having checked
        // above that nothing is there; only a writer racing this one could be overwritten.
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists && path.symlink_metadata().is_err() => {
            std::fs::rename(&temp, path)
        }
        other => other,
    };
    let _ = std::fs::remove_file(&temp);
    linked.map_err(|e| at(path, e))?;
    sync_directory(&dir);
    Ok(())
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

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn new_files_are_whole_private_and_never_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.key");
        // A write that fails half-way (a full disk) leaves nothing: no empty `server.key` that
        // would make the retry fail with "File exists".
        let failed = write_new_mode(&path, true, |out| {
            out.write_all(b"half a key")?;
            out.flush()?;
            Err(io::Error::other("No space left on device"))
        });
        assert!(failed.unwrap_err().to_string().contains("No space"));
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
        write_new_private(&path, b"the key").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"the key");
        let again = write_new_private(&path, b"another key").unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists, "{again}");
        assert_eq!(std::fs::read(&path).unwrap(), b"the key");
        assert_eq!(names(dir.path()), vec!["server.key".to_string()]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let secret = dir.path().join("secret");
            write_atomic_private(&secret, b"s").unwrap();
            let mode = std::fs::metadata(&secret).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
