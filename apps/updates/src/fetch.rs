//! The client side of private updates (upPIR, seed 000, section 4.3): verify the mirror list
//! and the manifest, retrieve a file's blocks privately, check every block, write atomically.
//!
//! What a mirror learns: that *some* file of this many blocks was fetched (the number of
//! queries), never which one. Releases built with size classes make that count reveal only
//! the size class. The privacy assumption depends on the scheme, see [`SchemeChoice`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pir_client::{
    retrieve, HttpsTransport, Incident, MirrorInfo, MirrorStats, RetrieveOptions, Transport,
};
use pir_core::MultiServerScheme;
use pir_keys::PublicKey;
use pir_xor::{AnswerMode, Chor, RaidPir};

use crate::{Manifest, MirrorList, UpdateError};

/// Largest manifest a client accepts from a mirror (256 MiB: 8 M block hashes).
pub const MAX_MANIFEST_BYTES: usize = 256 << 20;

/// Which scheme to fetch with, and what it assumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemeChoice {
    /// Chor et al. over `servers` mirrors: as long as at least one of the mirrors asked does
    /// not collude with the others, none of them learns which file you fetched. Each mirror
    /// receives `B` bits per block.
    Chor {
        /// Mirrors asked per query.
        servers: usize,
    },
    /// RAID-PIR over `servers` mirrors with redundancy `r` and `c` chunks: as long as no `r`
    /// of the mirrors asked collude, none of them learns which file you fetched. Each mirror
    /// receives a 128-bit seed plus about `B / n` bits, and scans about `r / n` of the data.
    RaidPir {
        /// Mirrors asked per query (`n`).
        servers: usize,
        /// Redundancy `r`, `2 <= r <= n`.
        redundancy: usize,
        /// Chunks `c` (defaults to `n`); one query fetches up to `c` blocks.
        chunks: usize,
    },
}

impl SchemeChoice {
    /// The privacy assumption, in words a user understands.
    pub fn assumption(&self) -> String {
        match *self {
            SchemeChoice::Chor { servers } => format!(
                "Chor over {servers} mirrors: as long as at least one of the mirrors asked does not collude with the others, none of them learns which file you fetched"
            ),
            SchemeChoice::RaidPir { servers, redundancy, .. } => format!(
                "RAID-PIR over {servers} mirrors, redundancy {redundancy}: as long as no {redundancy} of the mirrors asked collude, none of them learns which file you fetched"
            ),
        }
    }

    /// Mirrors one query goes to.
    pub fn servers(&self) -> usize {
        match *self {
            SchemeChoice::Chor { servers } | SchemeChoice::RaidPir { servers, .. } => servers,
        }
    }
}

/// A fetched file and what it took.
#[derive(Debug)]
pub struct Fetched {
    /// The file's bytes (verified against the manifest).
    pub bytes: Vec<u8>,
    /// Blocks retrieved (including size-class padding).
    pub blocks: u64,
    /// Queries per mirror position.
    pub queries: usize,
    /// Traffic per mirror of the list.
    pub stats: Vec<MirrorStats>,
    /// Mirrors that failed or cheated, with evidence.
    pub incidents: Vec<Incident>,
    /// Wall time of the private retrieval.
    pub elapsed: Duration,
}

/// Retrieves file `name` of `manifest` (whose signed bytes hash to `release_id`) privately.
pub async fn fetch_file<T: Transport>(
    manifest: &Manifest,
    release_id: [u8; 32],
    name: &str,
    mirrors: &[MirrorInfo],
    transport: Arc<T>,
    choice: SchemeChoice,
) -> Result<Fetched, UpdateError> {
    let entry = manifest.file(name).ok_or_else(|| {
        UpdateError::Input(format!(
            "the release has no file named {name:?} ({} files; names are paths like {:?})",
            manifest.files.len(),
            manifest
                .files
                .first()
                .map(|f| f.name.as_str())
                .unwrap_or("")
        ))
    })?;
    let shape = manifest.shape()?;
    let indices: Vec<usize> = (entry.first_block..entry.first_block + entry.block_count)
        .map(|i| i as usize)
        .collect();
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
    let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::from_os_rng();
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
                retrieve(
                    &scheme, transport, mirrors, &options, &rounds, &verify, &mut rng,
                )
                .await?,
                rounds.len(),
            )
        }
    };
    let elapsed = started.elapsed();

    let mut blocks = retrieval.blocks;
    blocks.sort_by_key(|(index, _)| *index);
    let mut bytes: Vec<u8> = Vec::with_capacity(indices.len() * shape.block_size());
    for (_, block) in &blocks {
        bytes.extend_from_slice(block);
    }
    let size = usize::try_from(entry.size)
        .map_err(|_| UpdateError::Input("file too large for this machine".into()))?;
    bytes.truncate(size);
    if pir_keys::sha256(&bytes) != entry.sha256 {
        return Err(UpdateError::Format(format!(
            "{name}: reassembled file does not match its manifest hash"
        )));
    }
    Ok(Fetched {
        bytes,
        blocks: entry.block_count,
        queries,
        stats: retrieval.stats,
        incidents: retrieval.incidents,
        elapsed,
    })
}

/// Reads and verifies a signed mirror list file.
pub fn load_mirror_list(path: &Path, vendor: &PublicKey) -> Result<Vec<MirrorInfo>, UpdateError> {
    let bytes = std::fs::read(path).map_err(|source| UpdateError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let list = MirrorList::decode_verified(&bytes, vendor)?;
    Ok(list
        .mirrors
        .into_iter()
        .map(|m| MirrorInfo {
            url: m.url,
            key: m.key,
        })
        .collect())
}

/// Fetches the signed manifest from the first mirror that sends one with a valid vendor
/// signature. A mirror that sends a tampered manifest is skipped (and named in the error if no
/// mirror sends a valid one). Returns the manifest and its release id.
pub async fn load_manifest<T: Transport>(
    transport: &T,
    mirrors: &[MirrorInfo],
    vendor: &PublicKey,
) -> Result<(Manifest, [u8; 32]), UpdateError> {
    let mut failures = Vec::new();
    let mut tampered = false;
    for (i, mirror) in mirrors.iter().enumerate() {
        match pir_client::fetch_manifest(transport, i, MAX_MANIFEST_BYTES).await {
            Ok(bytes) => match Manifest::decode_verified(&bytes, vendor) {
                Ok(manifest) => return Ok((manifest, Manifest::release_id(&bytes))),
                Err(e) => {
                    tracing::warn!(mirror = %mirror.url, "manifest rejected: {e}");
                    tampered = true;
                    failures.push(format!(
                        "{} sent a manifest that was rejected: {e}",
                        mirror.url
                    ));
                }
            },
            Err(e) => failures.push(format!("{}: {e}", mirror.url)),
        }
    }
    let message = format!("no mirror sent a valid manifest: {}", failures.join("; "));
    Err(if tampered {
        UpdateError::Signature(message)
    } else {
        UpdateError::Input(message)
    })
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
            std::fs::write(&path, evidence.encode()).map_err(|source| UpdateError::Io {
                path: path.display().to_string(),
                source,
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

/// Everything `pir fetch` does: verify the mirror list, fetch and verify the manifest,
/// retrieve `name` privately, save evidence of cheating mirrors, write `out` atomically.
pub async fn fetch_to_file(
    name: &str,
    mirror_list: &Path,
    vendor: &PublicKey,
    out: &Path,
    choice: SchemeChoice,
) -> Result<(Fetched, Vec<PathBuf>), UpdateError> {
    let mirrors = load_mirror_list(mirror_list, vendor)?;
    let pins: Vec<(String, PublicKey)> = mirrors.iter().map(|m| (m.url.clone(), m.key)).collect();
    let transport =
        Arc::new(HttpsTransport::new(&pins).map_err(|e| UpdateError::Input(e.to_string()))?);
    let (manifest, release_id) = load_manifest(transport.as_ref(), &mirrors, vendor).await?;
    let result = fetch_file(&manifest, release_id, name, &mirrors, transport, choice).await;
    match result {
        Ok(fetched) => {
            let evidence = save_evidence(out, &fetched.incidents)?;
            if out == Path::new(STDOUT) {
                write_stdout(&fetched.bytes)?;
            } else {
                write_atomically(out, &fetched.bytes)?;
            }
            Ok((fetched, evidence))
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
