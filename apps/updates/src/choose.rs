//! Choosing the release to fetch from and the mirrors that serve it.

use pir_client::{MirrorInfo, Transport};
use pir_keys::PublicKey;

use crate::fetch::MAX_MANIFEST_BYTES;
use crate::freshness::Freshness;
use crate::{Manifest, UpdateError};

/// The release a client fetches from, and the mirrors that serve it first.
#[derive(Debug, Clone)]
pub struct ChosenRelease {
    /// The verified manifest.
    pub manifest: Manifest,
    /// SHA-256 of its signed bytes.
    pub release_id: [u8; 32],
    /// Mirror list positions, those serving the release first (in list order), then the rest
    /// as last spares.
    pub order: Vec<usize>,
}

/// Chooses the release to fetch from: asks every mirror which releases it serves, takes the
/// newest one served by at least `need` mirrors (during a rollover, some mirrors serve the next
/// release before the others), fetches its manifest from a mirror that serves it and checks the
/// vendor signature, the id, and freshness (expiry, and no older than the newest release this
/// client used, when `freshness` is given). A mirror that sends a tampered manifest is skipped
/// and named in the error if nothing else works.
pub async fn choose_release<T: Transport>(
    transport: &T,
    mirrors: &[MirrorInfo],
    vendor: &PublicKey,
    need: usize,
    freshness: Option<&Freshness>,
) -> Result<ChosenRelease, UpdateError> {
    // The manifest kept from the last session is most likely the one to use: check its
    // signature (a few ms for a large release) while the mirrors are asked.
    let checking = freshness.and_then(Freshness::kept).map(|(id, bytes)| {
        let vendor = *vendor;
        std::thread::spawn(move || {
            let manifest = Manifest::decode_verified(&bytes, &vendor);
            (id, bytes, manifest)
        })
    });
    let lists = futures_join_all(mirrors.len(), |i| releases_of(transport, i)).await;
    let mut kept = checking.and_then(|thread| thread.join().ok());
    let mut failures = Vec::new();
    // id -> (version hint, mirrors serving it)
    let mut candidates: Vec<([u8; 32], u64, Vec<usize>)> = Vec::new();
    // Manifests that mirrors without releases lists sent instead, by id (checked below).
    let mut sent: Vec<([u8; 32], Vec<u8>)> = Vec::new();
    for (i, list) in lists.into_iter().enumerate() {
        match list {
            Ok((infos, manifest)) => {
                if let (Some(bytes), Some(info)) = (manifest, infos.first()) {
                    if !sent.iter().any(|(id, _)| *id == info.id) {
                        sent.push((info.id, bytes));
                    }
                }
                for info in infos {
                    match candidates.iter_mut().find(|c| c.0 == info.id) {
                        Some(c) => c.2.push(i),
                        None => candidates.push((info.id, info.version, vec![i])),
                    }
                }
            }
            Err(e) => {
                tracing::warn!(mirror = %mirrors[i].url, "no releases list, used only as a last spare: {e}");
                failures.push(format!("{}: {e}", mirrors[i].url));
            }
        }
    }
    // Served by enough mirrors first, then newest, then most widely served.
    candidates.sort_by_key(|(_, version, serving)| {
        (
            serving.len() < need,
            std::cmp::Reverse(*version),
            std::cmp::Reverse(serving.len()),
        )
    });
    let mut tampered = false;
    let mut stale: Option<UpdateError> = None;
    for (id, _, serving) in &candidates {
        // The kept manifest, already checked, if it is this release; else a mirror's.
        let mut checked = match kept.take() {
            Some((kept_id, bytes, Ok(manifest))) if kept_id == *id => Some((bytes, manifest)),
            other => {
                kept = other;
                None
            }
        };
        let sources: Vec<Option<usize>> = checked
            .is_some()
            .then_some(None)
            .into_iter()
            .chain(serving.iter().copied().map(Some))
            .collect();
        for source in sources {
            let (bytes, manifest) = match (source, checked.take()) {
                (None, Some(pair)) => pair,
                (None, None) => continue,
                (Some(i), _) => {
                    let already = sent.iter().find(|(sent_id, _)| sent_id == id);
                    let fetched = match already {
                        Some((_, bytes)) => Ok(bytes.clone()),
                        None => {
                            pir_client::fetch_manifest_of(
                                transport,
                                i,
                                Some(id),
                                MAX_MANIFEST_BYTES,
                            )
                            .await
                        }
                    };
                    let bytes = match fetched {
                        Ok(bytes) => bytes,
                        Err(e) => {
                            failures.push(format!("{}: {e}", mirrors[i].url));
                            continue;
                        }
                    };
                    let from = mirrors[i].url.as_str();
                    if Manifest::release_id(&bytes) != *id {
                        tampered = true;
                        failures.push(format!(
                            "{from} sent a manifest that is not the release it listed"
                        ));
                        continue;
                    }
                    match Manifest::decode_verified(&bytes, vendor) {
                        Ok(manifest) => (bytes, manifest),
                        Err(e) => {
                            tracing::warn!(from, "manifest rejected: {e}");
                            tampered = true;
                            failures.push(format!("{from} sent a manifest that was rejected: {e}"));
                            continue;
                        }
                    }
                }
            };
            if let Some(freshness) = freshness {
                if let Err(e) = freshness.check(&manifest, crate::freshness::now_unix()) {
                    stale.get_or_insert(e);
                    break; // the same release from another mirror is just as stale
                }
                freshness.keep_manifest(id, &bytes);
            }
            let mut order = serving.clone();
            order.extend((0..mirrors.len()).filter(|m| !serving.contains(m)));
            return Ok(ChosenRelease {
                manifest,
                release_id: *id,
                order,
            });
        }
    }
    if let Some(stale) = stale {
        return Err(stale);
    }
    let message = format!("no mirror sent a valid manifest: {}", failures.join("; "));
    Err(if tampered {
        UpdateError::Signature(message)
    } else {
        UpdateError::Input(message)
    })
}

/// The releases mirror `i` serves. A mirror from before releases lists (it refuses the
/// request) serves exactly one release: the manifest it sends, which is returned too so that it
/// is not downloaded twice (its version here is a hint; the manifest is checked later).
async fn releases_of<T: Transport>(
    transport: &T,
    i: usize,
) -> Result<(Vec<pir_service::ReleaseInfo>, Option<Vec<u8>>), pir_client::TransportError> {
    match pir_client::fetch_releases(transport, i).await {
        Ok(list) => Ok((list, None)),
        Err(pir_client::TransportError::Refused(_)) => {
            let bytes = pir_client::fetch_manifest(transport, i, MAX_MANIFEST_BYTES).await?;
            let version = Manifest::decode_unverified(&bytes).map_or(0, |m| m.release_version);
            let info = pir_service::ReleaseInfo {
                id: Manifest::release_id(&bytes),
                version,
                expires_unix: 0,
            };
            Ok((vec![info], Some(bytes)))
        }
        Err(e) => Err(e),
    }
}

/// Runs `make(i)` for `i` in `0..n` concurrently; results in order.
async fn futures_join_all<F, Fut, R>(n: usize, make: F) -> Vec<R>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = R>,
{
    let mut futures: Vec<std::pin::Pin<Box<Fut>>> = (0..n).map(|i| Box::pin(make(i))).collect();
    let mut results: Vec<Option<R>> = (0..n).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, future) in futures.iter_mut().enumerate() {
            if results[i].is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(r) => results[i] = Some(r),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    results.into_iter().flatten().collect()
}
