//! Disk space: what a new store needs, checked before anything is written, and the reserve
//! that lets a store open on a full disk.
//!
//! Slot files are allocated whole at `init` (`fallocate`), so ORAM writes into them never
//! need new space. What still does is the state file, replaced atomically (a temporary copy
//! beside it) at every flush and at every open. `STATE.reserve`, a file of about three times
//! the state's size made at init, is given back when that replacement meets a full disk, and
//! taken again once there is room.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One file system's needs: its free bytes and what the new store would put on it.
#[derive(Debug, PartialEq, Eq)]
pub struct Shortfall {
    /// A path on the file system.
    pub path: PathBuf,
    /// Bytes needed there.
    pub need: u64,
    /// Bytes free there (for an unprivileged user).
    pub free: u64,
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} needs {} MiB free for this store (its slots take about 9.5x the size, plus the state), but only {} MiB are free",
            self.path.display(),
            self.need.div_ceil(1 << 20),
            self.free >> 20
        )
    }
}

/// The nearest existing directory at or above `path` (a store directory may not exist yet).
fn existing(path: &Path) -> PathBuf {
    let mut at = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    while !at.exists() {
        if !at.pop() {
            return PathBuf::from(".");
        }
    }
    at
}

/// Sums `needs` per file system and returns the first that lacks room; `free` reports a
/// path's free bytes (statvfs in [`check`]; a stand-in in tests).
pub fn shortfall(
    needs: &[(PathBuf, u64)],
    free: impl Fn(&Path) -> std::io::Result<u64>,
) -> std::io::Result<Option<Shortfall>> {
    let mut by_device: HashMap<u64, (PathBuf, u64)> = HashMap::new();
    for (path, need) in needs {
        let at = existing(path);
        let device = std::fs::metadata(&at)?.dev();
        let entry = by_device.entry(device).or_insert((at, 0));
        entry.1 = entry.1.saturating_add(*need);
    }
    let mut devices: Vec<_> = by_device.into_values().collect();
    devices.sort();
    for (path, need) in devices {
        let free = free(&path)?;
        if need > free {
            return Ok(Some(Shortfall { path, need, free }));
        }
    }
    Ok(None)
}

/// Free bytes for an unprivileged user on the file system holding `path`.
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let stat = rustix::fs::statvfs(path).map_err(std::io::Error::from)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// [`shortfall`] with the real free space.
pub fn check(needs: &[(PathBuf, u64)]) -> std::io::Result<Option<Shortfall>> {
    shortfall(needs, free_bytes)
}

/// Allocates `file`'s blocks up to its length, where the file system can (others keep the
/// file sparse; the free-space check stands in for the reservation there).
pub fn allocate(file: &std::fs::File, len: u64) -> std::io::Result<()> {
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The reserve file beside a state file: `STATE.reserve`.
pub fn reserve_path(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".reserve");
    PathBuf::from(name)
}

/// Makes sure the reserve holds `len` bytes; best effort (a full disk leaves it as it is).
pub fn keep_reserve(state: &Path, len: u64) {
    let path = reserve_path(state);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() >= len) {
        return;
    }
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .and_then(|file| {
            allocate(&file, len)?;
            file.set_len(len)?;
            file.sync_all()
        });
    if made.is_err() {
        // Half a reserve is worse than none: it hides that the disk is full.
        let _ = std::fs::remove_file(&path);
    }
}

/// Whether an I/O error means the disk is full.
pub fn is_full(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(28) || e.kind() == std::io::ErrorKind::StorageFull
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn needs_on_one_file_system_add_up_and_the_figure_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("not/yet/b");
        let needs = vec![(a, 600 << 20), (b, 600 << 20)];
        // 1 GiB free: each need fits alone, not both.
        let short = shortfall(&needs, |_| Ok(1 << 30)).unwrap().unwrap();
        assert_eq!((short.need, short.free), (1200 << 20, 1 << 30));
        assert!(short.to_string().contains("needs 1200 MiB free"), "{short}");
        assert_eq!(shortfall(&needs, |_| Ok(2 << 30)).unwrap(), None);
        assert!(free_bytes(dir.path()).unwrap() > 0);
    }

    #[test]
    fn the_reserve_is_made_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        keep_reserve(&state, 12345);
        assert_eq!(
            std::fs::metadata(reserve_path(&state)).unwrap().len(),
            12345
        );
        keep_reserve(&state, 100);
        assert_eq!(
            std::fs::metadata(reserve_path(&state)).unwrap().len(),
            12345
        );
    }
}
