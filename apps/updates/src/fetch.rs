//! The client side of private updates (upPIR, Cappos 2013, section 4.3): verify the mirror list
//! and the manifest, retrieve a file's blocks privately, check every block, write atomically.
//!
//! What a mirror learns: that *some* file of this many blocks was fetched (the number of
//! queries), never which one. Releases built with size classes make that count reveal only
//! the size class. The privacy assumption depends on the scheme, see [`SchemeChoice`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pir_client::{
    retrieve, HttpsTransport, Incident, MirrorInfo, MirrorStats, RetrieveOptions, Transport,
};
use pir_core::MultiServerScheme;
use pir_keys::PublicKey;
use pir_xor::{AnswerMode, Chor, RaidPir};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::choose::{choose_release_listed, ChosenRelease, Tiers};
use crate::current_list::{self, SignedList};
use crate::freshness::Freshness;
use crate::mirrors::MirrorEntry;
use crate::{Manifest, UpdateError};
use pir_xor::held::ChunkSet;

pub use crate::manifest::MAX_MANIFEST_BYTES;
pub use crate::scheme_choice::SchemeChoice;

/// Several files fetched in one retrieval.
#[derive(Debug)]
pub struct FetchedMany {
    /// `(name, bytes)` in the order asked, each verified against the manifest.
    pub files: Vec<(String, Vec<u8>)>,
    /// Blocks retrieved in all (including size-class padding).
    pub blocks: u64,
    /// Queries per mirror position.
    pub queries: usize,
    /// Traffic per mirror of the list.
    pub stats: Vec<MirrorStats>,
    /// Mirrors that failed or cheated, with evidence.
    pub incidents: Vec<Incident>,
    /// Wall time of the private retrieval.
    pub elapsed: Duration,
    /// The mirror list positions in the order this fetch used them: `stats[k]` is of mirror
    /// `mirrors[k]` (drawn afresh for every fetch, see [`crate::choose::mirror_order`]).
    pub mirrors: Vec<usize>,
}

impl FetchedMany {
    /// Bytes of all the files.
    pub fn total_bytes(&self) -> usize {
        self.files.iter().map(|(_, bytes)| bytes.len()).sum()
    }
}

/// Retrieves the files `names` of `manifest` privately in ONE retrieval: their blocks are
/// planned into rounds together and sent as batches of up to 64 queries per mirror, so several
/// files cost about what one file of their total size costs (a mirror learns the total number
/// of blocks, never which files).
pub async fn fetch_files<T: Transport>(
    manifest: &Manifest,
    release_id: [u8; 32],
    names: &[&str],
    mirrors: &[MirrorInfo],
    transport: Arc<T>,
    choice: SchemeChoice,
) -> Result<FetchedMany, UpdateError> {
    fetch_files_as(
        manifest,
        release_id,
        names,
        mirrors,
        transport,
        choice,
        &|_, _| true,
    )
    .await
}

/// [`fetch_files`] where RAID-PIR server position `p` may go only to a mirror `k` with
/// `can_play(k, p)` (chunk-only mirrors, see [`arrange`]); mirror `k < n` plays position `k`.
pub async fn fetch_files_as<T: Transport>(
    manifest: &Manifest,
    release_id: [u8; 32],
    names: &[&str],
    mirrors: &[MirrorInfo],
    transport: Arc<T>,
    choice: SchemeChoice,
    can_play: &(dyn Fn(usize, usize) -> bool + Sync),
) -> Result<FetchedMany, UpdateError> {
    let mut entries = Vec::with_capacity(names.len());
    for name in names {
        entries.push(manifest.file(name).ok_or_else(|| {
            UpdateError::Input(format!(
                "the release has no file named {name:?} ({} files; names are paths like {:?})",
                manifest.files.len(),
                manifest
                    .files
                    .first()
                    .map(|f| f.name.as_str())
                    .unwrap_or("")
            ))
        })?);
    }
    let shape = manifest.shape()?;
    let mut indices: Vec<usize> = entries
        .iter()
        .flat_map(|e| (e.first_block..e.first_block + e.block_count).map(|i| i as usize))
        .collect();
    indices.sort_unstable();
    indices.dedup();
    let hashes = &manifest.block_hashes;
    let verify = |index: usize, block: &[u8]| {
        hashes
            .get(index)
            .is_some_and(|h| *h == pir_keys::sha256(block))
    };
    // The answer mode depends only on the block count, which the number of queries reveals anyway.
    let mode = if indices.len() > 1 {
        AnswerMode::PerChunk
    } else {
        AnswerMode::Single
    };
    let mut rng = ChaCha20Rng::from_os_rng();
    let started = Instant::now();
    let (retrieval, queries) = match choice {
        SchemeChoice::Chor { servers } => {
            let scheme = Chor::new(shape, servers)?;
            let rounds = pir_client::retrieve::plan_rounds(&indices, 1, |i| i);
            let options = RetrieveOptions {
                release_id,
                max_answer: shape.block_size(),
            };
            (
                retrieve(
                    &scheme, transport, mirrors, &options, &rounds, &verify, &mut rng,
                )
                .await?,
                rounds.len(),
            )
        }
        SchemeChoice::Dpf => {
            let scheme = pir_xor::DpfPir::new(shape);
            let rounds = pir_client::retrieve::plan_rounds(&indices, 1, |i| i);
            let options = RetrieveOptions {
                release_id,
                max_answer: shape.block_size(),
            };
            (
                retrieve(
                    &scheme, transport, mirrors, &options, &rounds, &verify, &mut rng,
                )
                .await?,
                rounds.len(),
            )
        }
        SchemeChoice::RaidPir {
            servers,
            redundancy,
            chunks,
        } => {
            let scheme = RaidPir::new(
                shape,
                servers,
                redundancy,
                chunks.min(shape.block_count()),
                mode,
            )?;
            let rounds =
                pir_client::retrieve::plan_rounds(&indices, scheme.max_blocks_per_query(), |i| {
                    scheme.chunk_of(i)
                });
            let max_answer = (0..servers)
                .map(|s| scheme.answer_body_len(s))
                .max()
                .unwrap_or(0);
            let options = RetrieveOptions {
                release_id,
                max_answer,
            };
            (
                pir_client::retrieve_with_roles(
                    &scheme, transport, mirrors, &options, &rounds, &verify, can_play, &mut rng,
                )
                .await?,
                rounds.len(),
            )
        }
    };
    let elapsed = started.elapsed();

    let blocks: std::collections::HashMap<usize, Vec<u8>> = retrieval.blocks.into_iter().collect();
    let mut files = Vec::with_capacity(entries.len());
    for entry in &entries {
        let size = usize::try_from(entry.size)
            .map_err(|_| UpdateError::Input("file too large for this machine".into()))?;
        let mut bytes: Vec<u8> =
            Vec::with_capacity(entry.block_count as usize * shape.block_size());
        for index in entry.first_block..entry.first_block + entry.block_count {
            let block = blocks.get(&(index as usize)).ok_or_else(|| {
                UpdateError::Format(format!("{}: block {index} was not retrieved", entry.name))
            })?;
            bytes.extend_from_slice(block);
        }
        bytes.truncate(size);
        if pir_keys::sha256(&bytes) != entry.sha256 {
            return Err(UpdateError::Format(format!(
                "{}: reassembled file does not match its manifest hash",
                entry.name
            )));
        }
        files.push((entry.name.clone(), bytes));
    }
    Ok(FetchedMany {
        files,
        blocks: indices.len() as u64,
        queries,
        stats: retrieval.stats,
        incidents: retrieval.incidents,
        elapsed,
        mirrors: (0..mirrors.len()).collect(),
    })
}

/// Reads and verifies a signed mirror list file (its freshness is checked when a session
/// opens, see [`crate::current_list`]).
pub fn load_mirror_list(path: &Path, vendor: &PublicKey) -> Result<Vec<MirrorInfo>, UpdateError> {
    Ok(SignedList::load(path, vendor)?.mirrors())
}

/// A transport that sees the mirror list in another order: position `k` is mirror
/// `order[k]` of the inner transport.
#[derive(Debug)]
pub struct Reordered<T> {
    inner: Arc<T>,
    order: Vec<usize>,
}

impl<T> Reordered<T> {
    /// `inner` with positions permuted by `order`.
    pub fn new(inner: Arc<T>, order: Vec<usize>) -> Self {
        Self { inner, order }
    }
}

impl<T: Transport> Transport for Reordered<T> {
    async fn exchange(
        &self,
        mirror: usize,
        request: Vec<u8>,
        max_reply: usize,
    ) -> Result<Vec<u8>, pir_client::TransportError> {
        let Some(&inner) = self.order.get(mirror) else {
            return Err(pir_client::TransportError::Url(format!(
                "no mirror number {mirror}"
            )));
        };
        self.inner.exchange(inner, request, max_reply).await
    }
}

/// A client's view of one release on a set of mirrors: chosen once, then any number of fetches
/// (the apt method keeps one for its whole run), each from mirrors drawn afresh.
#[derive(Debug)]
pub struct UpdateSession<T> {
    /// The chosen release.
    pub release: ChosenRelease,
    /// The mirrors, in list order.
    pub mirrors: Vec<MirrorInfo>,
    /// What the signed list states of each mirror (release, chunks), in list order.
    entries: Vec<MirrorEntry>,
    transport: Arc<T>,
    /// What the session has learned of the mirrors since (asked as fetches draw them).
    tiers: Mutex<Tiers>,
    /// Draws each fetch's mirrors ([`Tiers::order`]).
    rng: Mutex<ChaCha20Rng>,
}

impl UpdateSession<HttpsTransport> {
    /// Verifies the mirror list file, takes a newer list kept from an earlier session or served
    /// by a mirror instead (see [`crate::current_list`]), refuses it if it is expired or older
    /// than the newest list used, connects over pinned TLS, chooses the release (see
    /// [`choose_release`]) and records both versions in `state_dir` (freshness).
    pub async fn open(
        mirror_list: &Path,
        vendor: &PublicKey,
        state_dir: &Path,
        need: usize,
    ) -> Result<Self, UpdateError> {
        let list = SignedList::load(mirror_list, vendor)?;
        Self::open_signed(list, vendor, state_dir, need).await
    }

    /// [`UpdateSession::open`] from a list already verified (the vendor service's).
    pub async fn open_signed(
        list: SignedList,
        vendor: &PublicKey,
        state_dir: &Path,
        need: usize,
    ) -> Result<Self, UpdateError> {
        if !state_dir.is_absolute() {
            // Relative, it would name another directory whenever the client runs elsewhere,
            // and rollback protection would silently start from nothing.
            return Err(UpdateError::Input(format!(
                "state directory {} is not an absolute path (see freshness::state_dir)",
                state_dir.display()
            )));
        }
        Self::open_listed(list, vendor, state_dir, need, connect_https).await
    }
}

/// A pinned TLS transport to `mirrors`.
fn connect_https(mirrors: &[MirrorInfo]) -> Result<Arc<HttpsTransport>, UpdateError> {
    let pins: Vec<(String, PublicKey)> = mirrors.iter().map(|m| (m.url.clone(), m.key)).collect();
    Ok(Arc::new(
        HttpsTransport::new(&pins).map_err(|e| UpdateError::Input(e.to_string()))?,
    ))
}

impl<T: Transport> UpdateSession<T> {
    /// [`UpdateSession::open`] over the transports `connect` makes for a list's mirrors: the
    /// newest of `list` and the kept one, refreshed from a mirror, checked and recorded in
    /// `state_dir`; then the release, checked and recorded too.
    pub async fn open_listed(
        list: SignedList,
        vendor: &PublicKey,
        state_dir: &Path,
        need: usize,
        connect: impl Fn(&[MirrorInfo]) -> Result<Arc<T>, UpdateError>,
    ) -> Result<Self, UpdateError> {
        let lists = Freshness::for_mirror_lists(state_dir, vendor);
        let now = crate::freshness::now_unix();
        let mut rng = ChaCha20Rng::from_os_rng();
        let mut list = current_list::newest_known(list, &lists, vendor);
        let mut transport = connect(&list.mirrors())?;
        let served =
            current_list::from_mirrors(transport.as_ref(), &list, vendor, now, &mut rng).await;
        if let Some(newer) = served {
            list = newer;
            transport = connect(&list.mirrors())?;
        }
        current_list::accept(&list, &lists, now)?;
        let freshness = Freshness::new(state_dir, vendor);
        let entries = list.list.mirrors.clone();
        Self::open_with_entries(transport, entries, vendor, Some(&freshness), need).await
    }

    /// A session on `mirrors` over `transport` (in list order, no list freshness); with
    /// `freshness`, the chosen release's version is checked and recorded.
    pub async fn open_with(
        transport: Arc<T>,
        mirrors: Vec<MirrorInfo>,
        vendor: &PublicKey,
        freshness: Option<&Freshness>,
        need: usize,
    ) -> Result<Self, UpdateError> {
        let entries = mirrors
            .into_iter()
            .map(|m| MirrorEntry::new(m.url, m.key))
            .collect();
        Self::open_with_entries(transport, entries, vendor, freshness, need).await
    }

    /// [`UpdateSession::open_with`] on the entries of a signed list: the releases they state
    /// are taken as said ([`choose_release_listed`]), and chunk-only mirrors get only the
    /// RAID-PIR positions they hold the chunks of ([`arrange`]).
    pub async fn open_with_entries(
        transport: Arc<T>,
        entries: Vec<MirrorEntry>,
        vendor: &PublicKey,
        freshness: Option<&Freshness>,
        need: usize,
    ) -> Result<Self, UpdateError> {
        let mut rng = ChaCha20Rng::from_os_rng();
        let mirrors: Vec<MirrorInfo> = entries
            .iter()
            .map(|e| MirrorInfo {
                url: e.url.clone(),
                key: e.key,
            })
            .collect();
        let listed: Vec<_> = entries.iter().map(|e| e.release).collect();
        let release = choose_release_listed(
            transport.as_ref(),
            &mirrors,
            &listed,
            vendor,
            need,
            freshness,
            &mut rng,
        )
        .await?;
        if let Some(freshness) = freshness {
            freshness.record(release.manifest.release_version)?;
        }
        Ok(Self {
            tiers: Mutex::new(release.mirrors.clone()),
            release,
            mirrors,
            entries,
            transport,
            rng: Mutex::new(rng),
        })
    }

    /// Draws each fetch's mirrors from `seed` instead of the operating system (for tests
    /// that count where fetches went).
    pub fn with_seed(self, seed: u64) -> Self {
        Self {
            rng: Mutex::new(ChaCha20Rng::seed_from_u64(seed)),
            ..self
        }
    }

    /// Fetches `names` privately in one retrieval (see [`fetch_files`]) from mirrors drawn at
    /// random for this fetch among those serving the release (a drawn mirror not asked yet is
    /// asked first, and drawn again if it serves another), then the spares.
    pub async fn fetch(
        &self,
        names: &[&str],
        choice: SchemeChoice,
    ) -> Result<FetchedMany, UpdateError> {
        let id = self.release.release_id;
        let holds: Vec<Option<ChunkSet>> = self.entries.iter().map(|e| e.chunks.clone()).collect();
        let choice = crate::chunks::fit_choice(choice, &holds)?;
        let shape = self.release.manifest.shape()?;
        let order = loop {
            let drawn = {
                let tiers = self.tiers.lock().unwrap_or_else(|p| p.into_inner());
                let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
                tiers.order(&mut *rng)
            };
            let order = crate::chunks::arrange(drawn, &holds, &self.mirrors, shape, choice)?;
            let (n, transport) = (choice.servers(), self.transport.as_ref());
            if !Tiers::ask_unasked(&self.tiers, &order, n, transport, &id).await {
                break order;
            }
        };
        let ordered: Vec<MirrorInfo> = order.iter().map(|&i| self.mirrors[i].clone()).collect();
        let transport = Arc::new(Reordered::new(self.transport.clone(), order.clone()));
        let can_play = crate::chunks::roles(&order, &holds, shape, choice);
        let mut fetched = fetch_files_as(
            &self.release.manifest,
            self.release.release_id,
            names,
            &ordered,
            transport,
            choice,
            &can_play,
        )
        .await?;
        fetched.mirrors = order;
        Ok(fetched)
    }
}

/// Writes `bytes` to `out` atomically: a temporary file in the same directory, synced, then
/// renamed over `out`. On any failure the temporary file is removed and `out` is untouched.
pub fn write_atomically(out: &Path, bytes: &[u8]) -> Result<(), UpdateError> {
    if out.file_name().is_none() {
        return Err(UpdateError::Input(format!(
            "{}: not a file path",
            out.display()
        )));
    }
    pir_fs::write_atomic_bytes(out, bytes).map_err(|source| UpdateError::Io {
        path: out.display().to_string(),
        source,
    })
}

/// Saves the evidence of every incident that has some, next to `out`; returns the paths.
///
/// Each file is readable by its owner only (0600), written whole or not at all: with no spare
/// mirror, the requests of all positions together reveal the block that was fetched.
pub fn save_evidence(out: &Path, incidents: &[Incident]) -> Result<Vec<PathBuf>, UpdateError> {
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let stem = out
        .file_name()
        .filter(|n| *n != "-")
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "fetch".into());
    let mut paths = Vec::new();
    for (k, incident) in incidents.iter().enumerate() {
        if let Some(evidence) = &incident.evidence {
            let path = dir.join(format!(
                "{stem}.evidence-{}-{k}.pir",
                evidence.key.fingerprint()
            ));
            pir_fs::write_atomic_private(&path, &evidence.encode()).map_err(|source| {
                UpdateError::Io {
                    path: path.display().to_string(),
                    source,
                }
            })?;
            paths.push(path);
        }
    }
    Ok(paths)
}

/// The `out` path that means standard output.
pub const STDOUT: &str = "-";

/// Writes verified bytes to standard output; a reader that went away early is not an error.
fn write_stdout(bytes: &[u8]) -> Result<(), UpdateError> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(UpdateError::Io {
            path: "standard output".into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Everything `pir fetch` does: verify the mirror list, choose the release and check its
/// manifest and freshness (state in `state_dir`), retrieve `name` privately, save evidence of
/// cheating mirrors, write `out` atomically.
pub async fn fetch_to_file(
    name: &str,
    mirror_list: &Path,
    vendor: &PublicKey,
    state_dir: &Path,
    out: &Path,
    choice: SchemeChoice,
) -> Result<(FetchedMany, Vec<PathBuf>), UpdateError> {
    let list = SignedList::load(mirror_list, vendor)?;
    fetch_listed_to_file(name, list, vendor, state_dir, out, choice).await
}

/// [`fetch_to_file`] from a list already verified (the vendor service's, or a file's).
pub async fn fetch_listed_to_file(
    name: &str,
    list: SignedList,
    vendor: &PublicKey,
    state_dir: &Path,
    out: &Path,
    choice: SchemeChoice,
) -> Result<(FetchedMany, Vec<PathBuf>), UpdateError> {
    let session = UpdateSession::open_signed(list, vendor, state_dir, choice.servers()).await?;
    let result = session.fetch(&[name], choice).await;
    match result {
        Ok(many) => {
            let evidence = save_evidence(out, &many.incidents)?;
            let bytes = many.files.first().map_or(&[][..], |(_, b)| b.as_slice());
            if out == Path::new(STDOUT) {
                write_stdout(bytes)?;
            } else {
                write_atomically(out, bytes)?;
            }
            Ok((many, evidence))
        }
        Err(UpdateError::Fetch(error)) => {
            let incidents = match &error {
                pir_client::FetchError::MirrorFailed { incidents, .. }
                | pir_client::FetchError::WrongBlock { incidents, .. } => incidents.clone(),
                _ => Vec::new(),
            };
            let evidence = save_evidence(out, &incidents)?;
            Err(UpdateError::FetchFailed { error, evidence })
        }
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_files_are_the_owners_only() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = MirrorInfo {
            url: "https://127.0.0.1:1".into(),
            key: crate::testutil::other_key().public(),
        };
        let incident = |evidence| Incident {
            mirror: 0,
            url: mirror.url.clone(),
            what: "signed a wrong answer".into(),
            evidence,
        };
        let evidence =
            pir_client::Evidence::new(&mirror, [3; 32], b"request".to_vec(), b"reply".to_vec());
        let incidents = [incident(None), incident(Some(evidence.clone()))];
        let paths = save_evidence(&dir.path().join("file.deb"), &incidents).unwrap();
        assert_eq!(paths.len(), 1);
        assert_eq!(std::fs::read(&paths[0]).unwrap(), evidence.encode());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&paths[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "evidence is mode {mode:o}");
    }
}
