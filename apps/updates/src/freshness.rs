//! Freshness: a client refuses an expired manifest and any release older than the newest it
//! has used, so a mirror cannot freeze it on an old release or roll it back to one with known
//! holes (the freeze and rollback attacks that TUF and apt's `Valid-Until` defend against).
//!
//! The vendor signs a release version and an expiry into every manifest
//! ([`crate::Manifest::release_version`], [`crate::Manifest::expires_unix`]). The client keeps
//! the newest version it has accepted from each vendor in its state directory, one small file
//! per vendor key (`newest-<fingerprint>`), written atomically.
//!
//! Signed mirror lists age the same way ([`crate::MirrorList::list_version`],
//! [`crate::MirrorList::expires_unix`]): [`Freshness::for_mirror_lists`] keeps their newest
//! version in `newest-mirror-list-<fingerprint>`, and the newest list itself beside it.

use std::path::{Path, PathBuf};

use pir_keys::PublicKey;

use crate::{Manifest, UpdateError};

/// The client's memory of the newest release (or mirror list) it accepted from one vendor.
#[derive(Debug, Clone)]
pub struct Freshness {
    path: PathBuf,
    document: Document,
}

/// What a [`Freshness`] record is about: the words of its refusals differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Document {
    Release,
    MirrorList,
}

/// The state directory used when none is given: `$PIR_STATE_DIR`, else
/// `$XDG_STATE_HOME/pir`, else `$HOME/.local/state/pir`.
///
/// The result is always absolute. A relative state directory would be resolved against
/// whatever directory the client happens to run in, and rollback protection would silently
/// start from nothing there; so an empty variable counts as unset, a relative
/// `XDG_STATE_HOME` is ignored (as the XDG Base Directory specification says), and a relative
/// `PIR_STATE_DIR` or `HOME`, or no usable variable at all, is an error saying what to set.
pub fn default_state_dir() -> Result<PathBuf, UpdateError> {
    state_dir_from(None, |name| std::env::var_os(name))
}

/// The state directory to use: `explicit` (a `--state-dir` or apt's `Acquire::pir::StateDir`,
/// made absolute against the current directory once, now) or [`default_state_dir`].
pub fn state_dir(explicit: Option<&Path>) -> Result<PathBuf, UpdateError> {
    state_dir_from(explicit, |name| std::env::var_os(name))
}

/// [`state_dir`] with the environment read through `var`.
fn state_dir_from(
    explicit: Option<&Path>,
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<PathBuf, UpdateError> {
    if let Some(dir) = explicit {
        if dir.as_os_str().is_empty() {
            return Err(UpdateError::Input(
                "the state directory is empty: give a directory for the rollback-protection \
                 state"
                    .into(),
            ));
        }
        return std::path::absolute(dir).map_err(UpdateError::io_at(dir));
    }
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("PIR_STATE_DIR") {
        return absolute_or_refused(dir, "PIR_STATE_DIR");
    }
    if let Some(dir) = set("XDG_STATE_HOME").filter(|d| d.is_absolute()) {
        return Ok(dir.join("pir"));
    }
    match set("HOME") {
        Some(home) => absolute_or_refused(home, "HOME").map(|home| home.join(".local/state/pir")),
        None => Err(UpdateError::Input(
            "no state directory for rollback protection: HOME is not set and neither \
             PIR_STATE_DIR nor XDG_STATE_HOME is; set PIR_STATE_DIR to an absolute path or \
             pass --state-dir (apt: Acquire::pir::StateDir)"
                .into(),
        )),
    }
}

fn absolute_or_refused(dir: PathBuf, variable: &str) -> Result<PathBuf, UpdateError> {
    if dir.is_absolute() {
        return Ok(dir);
    }
    Err(UpdateError::Input(format!(
        "{variable}={} is not an absolute path: the rollback-protection state would depend on \
         the directory pir runs in; set {variable} to an absolute path or pass --state-dir \
         (apt: Acquire::pir::StateDir)",
        dir.display()
    )))
}

/// Seconds since 1970, now.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// "in 6 days" / "3 hours ago": when `expires_unix` is, seen from `now`.
pub fn describe_expiry(expires_unix: u64, now: u64) -> String {
    let span = |seconds: u64| match seconds {
        s if s >= 2 * 86400 => format!("{} days", s / 86400),
        s if s >= 2 * 3600 => format!("{} hours", s / 3600),
        s if s >= 120 => format!("{} minutes", s / 60),
        s => format!("{s} seconds"),
    };
    if expires_unix > now {
        format!("valid for {} more", span(expires_unix - now))
    } else {
        format!("EXPIRED {} ago", span(now - expires_unix))
    }
}

impl Freshness {
    /// The record for `vendor` in `state_dir` (created on the first [`Freshness::record`]).
    /// It also keeps the last manifest used, see [`Freshness::keep_manifest`].
    pub fn new(state_dir: &Path, vendor: &PublicKey) -> Self {
        Self {
            path: state_dir.join(format!("newest-{}", vendor.fingerprint())),
            document: Document::Release,
        }
    }

    /// The record of `vendor`'s mirror lists in `state_dir`: the newest list version used, and
    /// that list ([`Freshness::keep_list`]).
    pub fn for_mirror_lists(state_dir: &Path, vendor: &PublicKey) -> Self {
        Self {
            path: state_dir.join(format!("newest-mirror-list-{}", vendor.fingerprint())),
            document: Document::MirrorList,
        }
    }

    /// The newest release version accepted so far, if any.
    pub fn newest_seen(&self) -> Result<Option<u64>, UpdateError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => text.trim().parse::<u64>().map(Some).map_err(|_| {
                UpdateError::Format(format!(
                    "{}: not a release version; the state file was damaged. Delete it only if \
                     you trust the next manifest a mirror sends",
                    self.path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(UpdateError::io(&self.path, e)),
        }
    }

    /// Refuses `manifest` if it has expired at `now` or is older than the newest release
    /// accepted before; the error names the attack.
    pub fn check(&self, manifest: &Manifest, now: u64) -> Result<(), UpdateError> {
        self.check_version(manifest.release_version, manifest.expires_unix, now)
    }

    /// Refuses a document of `version` expiring at `expires_unix` if it has expired at `now` or
    /// is older than the newest version accepted before; the error names the attack.
    pub fn check_version(
        &self,
        version: u64,
        expires_unix: u64,
        now: u64,
    ) -> Result<(), UpdateError> {
        if expires_unix <= now {
            let ago = describe_expiry(expires_unix, now);
            let ago = ago.trim_start_matches("EXPIRED ");
            return Err(UpdateError::Stale(match self.document {
                Document::Release => format!(
                    "the release manifest (version {version}) expired {ago}: a mirror may be \
                     replaying an old release to keep you from seeing updates (freeze attack), \
                     or the vendor has not re-signed it in time. Try other mirrors; if every \
                     mirror sends it, tell the vendor"
                ),
                Document::MirrorList => format!(
                    "the mirror list (version {version}) expired {ago}: an old list may be \
                     replayed to keep you on mirrors the vendor has dropped (freeze attack), or \
                     the vendor has not re-signed it in time. Get the current list from the \
                     vendor; if this is the newest, ask the vendor to re-sign it"
                ),
            }));
        }
        if let Some(newest) = self.newest_seen()? {
            if version < newest {
                let state = self.path.display();
                return Err(UpdateError::Stale(match self.document {
                    Document::Release => format!(
                        "the mirrors offer release version {version}, older than version \
                         {newest} which this client already used: a mirror may be rolling you \
                         back to a release with known holes (rollback attack). Try again later \
                         or other mirrors (state: {state})"
                    ),
                    Document::MirrorList => format!(
                        "the mirror list has version {version}, older than version {newest} \
                         which this client already used: an old list may be replayed to bring \
                         back mirrors the vendor has dropped (rollback attack). Get the current \
                         list from the vendor (state: {state})"
                    ),
                }));
            }
        }
        Ok(())
    }

    /// The mirror list kept by [`Freshness::keep_list`], if any (the caller verifies it).
    pub fn kept_list(&self) -> Option<Vec<u8>> {
        std::fs::read(self.list_path()).ok()
    }

    /// Keeps the signed mirror list `bytes`, the newest this client has used, so that a newer
    /// list learned from a mirror outlives the session. A failure to keep it only costs
    /// learning it again.
    pub fn keep_list(&self, bytes: &[u8]) {
        let path = self.list_path();
        if let Some(dir) = path.parent() {
            if std::fs::create_dir_all(dir).is_ok() {
                let _ = pir_fs::write_atomic_bytes(&path, bytes);
            }
        }
    }

    fn list_path(&self) -> PathBuf {
        self.path.with_extension("pir")
    }

    /// The manifest kept by [`Freshness::keep_manifest`] and its release id, if its bytes
    /// still hash to the id in its name (the caller checks the vendor signature as for a
    /// downloaded one).
    pub fn kept(&self) -> Option<([u8; 32], Vec<u8>)> {
        let dir = self.path.parent()?;
        let prefix = self.manifest_prefix();
        for entry in std::fs::read_dir(dir).ok()?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(hex_id) = name
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".pir"))
            else {
                continue;
            };
            let Ok(id) = <[u8; 32]>::try_from(hex::decode(hex_id).unwrap_or_default()) else {
                continue;
            };
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            if Manifest::release_id(&bytes) == id {
                return Some((id, bytes));
            }
        }
        None
    }

    /// Keeps the signed manifest `bytes` of release `id`, so the next session need not download
    /// it again (a release of 1 GB in 4 KiB blocks has an 8 MB manifest), and drops the ones
    /// kept before. A failure to keep it only costs a download next time.
    pub fn keep_manifest(&self, id: &[u8; 32], bytes: &[u8]) {
        let path = self.manifest_path(id);
        if path.exists() {
            return;
        }
        let Some(dir) = self.path.parent() else {
            return;
        };
        if std::fs::create_dir_all(dir).is_err()
            || pir_fs::write_atomic_bytes(&path, bytes).is_err()
        {
            return;
        }
        let prefix = self.manifest_prefix();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(&prefix) && entry.path() != path {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }

    fn manifest_prefix(&self) -> String {
        let stem = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("{}-manifest-", stem.trim_start_matches("newest-"))
    }

    fn manifest_path(&self, id: &[u8; 32]) -> PathBuf {
        self.path
            .with_file_name(format!("{}{}.pir", self.manifest_prefix(), hex::encode(id)))
    }

    /// Remembers `version` if it is newer than what was remembered.
    pub fn record(&self, version: u64) -> Result<(), UpdateError> {
        if self.newest_seen()?.is_some_and(|newest| newest >= version) {
            return Ok(());
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(UpdateError::io_at(dir))?;
        }
        pir_fs::write_atomic_bytes(&self.path, format!("{version}\n").as_bytes())
            .map_err(UpdateError::io_at(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::vendor_key;

    fn manifest(version: u64, expires_unix: u64) -> Manifest {
        Manifest {
            block_size: 64,
            block_count: 1,
            created_unix: 0,
            release_version: version,
            expires_unix,
            files: Vec::new(),
            block_hashes: Vec::new(),
        }
    }

    #[test]
    fn expired_and_older_releases_are_refused_and_the_newest_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = Freshness::new(dir.path(), &vendor_key().public());
        assert_eq!(fresh.newest_seen().unwrap(), None);
        fresh.check(&manifest(5, 1000), 999).unwrap();
        let expired = fresh.check(&manifest(5, 1000), 1000).unwrap_err();
        assert!(expired.to_string().contains("freeze attack"), "{expired}");
        fresh.record(5).unwrap();
        fresh.record(3).unwrap(); // never goes back
        assert_eq!(fresh.newest_seen().unwrap(), Some(5));
        fresh.check(&manifest(5, 1000), 10).unwrap();
        fresh.check(&manifest(6, 1000), 10).unwrap();
        let rollback = fresh.check(&manifest(4, 1000), 10).unwrap_err();
        assert!(
            rollback.to_string().contains("rollback attack"),
            "{rollback}"
        );
        // Another vendor has its own record.
        let other = Freshness::new(dir.path(), &crate::testutil::other_key().public());
        other.check(&manifest(1, 1000), 10).unwrap();
        // Manifests are kept by id; only the newest one stays, and a damaged copy is ignored.
        fresh.keep_manifest(&[1; 32], b"not this one");
        assert_eq!(fresh.kept(), None, "bytes must hash to the id");
        let bytes = b"signed manifest bytes".to_vec();
        let id = Manifest::release_id(&bytes);
        fresh.keep_manifest(&id, &bytes);
        assert_eq!(fresh.kept(), Some((id, bytes.clone())));
        let newer = b"the next one".to_vec();
        let newer_id = Manifest::release_id(&newer);
        fresh.keep_manifest(&newer_id, &newer);
        assert_eq!(
            fresh.kept(),
            Some((newer_id, newer)),
            "only the newest is kept"
        );
        // A damaged record is an error, not a fresh start.
        std::fs::write(&fresh.path, "garbage").unwrap();
        assert!(fresh.check(&manifest(9, 1000), 10).is_err());
    }

    #[test]
    fn state_directories_are_absolute_or_refused() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let ok = |vars, want: &str| {
            assert_eq!(
                state_dir_from(None, env(vars)).unwrap(),
                PathBuf::from(want)
            );
        };
        let refused = |vars, mention: &str| {
            let error = state_dir_from(None, env(vars)).unwrap_err().to_string();
            assert!(error.contains(mention), "{error} should mention {mention}");
        };
        ok(&[("PIR_STATE_DIR", "/s"), ("HOME", "/h")], "/s");
        ok(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")], "/x/pir");
        ok(&[("HOME", "/h")], "/h/.local/state/pir");
        // Empty counts as unset; a relative XDG_STATE_HOME is ignored (XDG spec).
        ok(
            &[
                ("PIR_STATE_DIR", ""),
                ("XDG_STATE_HOME", ""),
                ("HOME", "/h"),
            ],
            "/h/.local/state/pir",
        );
        ok(
            &[("XDG_STATE_HOME", "rel"), ("HOME", "/h")],
            "/h/.local/state/pir",
        );
        refused(
            &[("PIR_STATE_DIR", "rel"), ("HOME", "/h")],
            "PIR_STATE_DIR=rel",
        );
        refused(&[("HOME", "rel")], "HOME=rel");
        refused(&[("HOME", "")], "HOME is not set");
        refused(
            &[("PIR_STATE_DIR", ""), ("XDG_STATE_HOME", "")],
            "HOME is not set",
        );
        // An explicit directory is made absolute now, once.
        let explicit = state_dir_from(Some(Path::new("state")), env(&[])).unwrap();
        assert!(
            explicit.is_absolute() && explicit.ends_with("state"),
            "{explicit:?}"
        );
        assert!(state_dir_from(Some(Path::new("")), env(&[("HOME", "/h")])).is_err());
    }

    #[test]
    fn expiry_is_described_in_words() {
        assert_eq!(
            describe_expiry(100 + 3 * 86400, 100),
            "valid for 3 days more"
        );
        assert_eq!(describe_expiry(100, 100 + 7200), "EXPIRED 2 hours ago");
    }
}
