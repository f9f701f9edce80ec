//! Choosing the release to fetch from and the mirrors that serve it.

use pir_client::{MirrorInfo, Transport};
use pir_keys::PublicKey;
use rand::seq::SliceRandom;
use rand::Rng;

use crate::freshness::Freshness;
use crate::manifest::MAX_MANIFEST_BYTES;
use crate::mirrors::ListedRelease;
use crate::{Manifest, UpdateError};

/// The release a client fetches from, and what it knows of the mirrors.
#[derive(Debug, Clone)]
pub struct ChosenRelease {
    /// The verified manifest.
    pub manifest: Manifest,
    /// SHA-256 of its signed bytes.
    pub release_id: [u8; 32],
    /// Which mirrors serve it, as far as the client has asked.
    pub mirrors: Tiers,
}

/// Mirror list positions by what the client knows of them, for one release.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tiers {
    /// Said they serve the release.
    pub serving: Vec<usize>,
    /// Not asked yet: listed by the vendor, so most likely serving it too.
    pub unasked: Vec<usize>,
    /// Serve something else or did not answer: last spares.
    pub elsewhere: Vec<usize>,
}

impl Tiers {
    /// The mirror order of one fetch, drawn afresh (see [`mirror_order`]): the mirrors serving
    /// the release or not asked yet, in a uniformly random order, then the others.
    pub fn order<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<usize> {
        let likely: Vec<usize> = self.serving.iter().chain(&self.unasked).copied().collect();
        mirror_order(&[&likely, &self.elsewhere], rng)
    }

    /// Notes what mirror `m`, asked now, said: whether it serves the release.
    pub fn learned(&mut self, m: usize, serves: bool) {
        self.unasked.retain(|&u| u != m);
        if serves {
            self.serving.push(m);
        } else {
            self.elsewhere.push(m);
        }
    }

    /// Asks the mirrors among the first `n` of `order` that were not asked yet which releases
    /// they serve, and notes whether each serves `release`. Returns whether any was asked
    /// (then `order` should be drawn again).
    pub async fn ask_unasked<T: Transport>(
        tiers: &std::sync::Mutex<Tiers>,
        order: &[usize],
        n: usize,
        transport: &T,
        release: &[u8; 32],
    ) -> bool {
        let to_ask: Vec<usize> = {
            let known = tiers.lock().unwrap_or_else(|p| p.into_inner());
            order
                .iter()
                .take(n)
                .copied()
                .filter(|m| known.unasked.contains(m))
                .collect()
        };
        if to_ask.is_empty() {
            return false;
        }
        let lists = futures_join_all(to_ask.len(), |k| releases_of(transport, to_ask[k])).await;
        let mut known = tiers.lock().unwrap_or_else(|p| p.into_inner());
        for (&m, list) in to_ask.iter().zip(lists) {
            let serves = match list {
                Ok((infos, _)) => infos.iter().any(|i| i.id == *release),
                Err(e) => {
                    tracing::warn!(
                        mirror = m,
                        "no releases list, used only as a last spare: {e}"
                    );
                    false
                }
            };
            known.learned(m, serves);
        }
        true
    }
}

/// The mirror list positions in the order one fetch uses them: each tier in a uniformly random
/// order, the tiers one after the other (the mirrors serving the release, then spares).
///
/// The first `n` positions are the mirrors asked; spares replace them in this order. Drawn
/// afresh for every fetch, every mirror serving the release is equally likely to be asked,
/// so load spreads over the whole list, and colluding mirrors see a random share of a
/// client's fetches instead of all of them (README, "What each mirror learns").
pub fn mirror_order<R: Rng + ?Sized>(tiers: &[&[usize]], rng: &mut R) -> Vec<usize> {
    let mut order = Vec::with_capacity(tiers.iter().map(|t| t.len()).sum());
    for tier in tiers {
        let mut tier = tier.to_vec();
        tier.shuffle(rng);
        order.extend(tier);
    }
    order
}

/// What the mirrors asked so far said.
#[derive(Default)]
struct Asked {
    /// id -> (version hint, mirrors serving it).
    candidates: Vec<([u8; 32], u64, Vec<usize>)>,
    /// Manifests that mirrors without releases lists sent instead, by id.
    sent: Vec<([u8; 32], Vec<u8>)>,
    failures: Vec<String>,
    /// (release, mirror) whose manifest was tried and refused.
    tried: Vec<([u8; 32], usize)>,
    /// Releases refused as stale (the same bytes from any mirror are just as stale).
    stale_ids: Vec<[u8; 32]>,
    stale: Option<UpdateError>,
    tampered: bool,
}

/// Chooses the release to fetch from without asking every mirror: asks `need` mirrors drawn at
/// random which releases they serve, then `need` more at a time until some release is served by
/// at least `need` of those asked (during a rollover, some mirrors serve the next release before
/// the others), and takes the newest such one. Its manifest comes from a mirror that serves it
/// (or the copy kept from the last session) and is checked: the vendor signature, the id, and
/// freshness (expiry, and no older than the newest release this client used, when `freshness`
/// is given). A mirror that sends a tampered manifest is skipped and named in the error if
/// nothing else works.
pub async fn choose_release<T: Transport, R: Rng + ?Sized>(
    transport: &T,
    mirrors: &[MirrorInfo],
    vendor: &PublicKey,
    need: usize,
    freshness: Option<&Freshness>,
    rng: &mut R,
) -> Result<ChosenRelease, UpdateError> {
    choose_release_listed(transport, mirrors, &[], vendor, need, freshness, rng).await
}

/// [`choose_release`] knowing, from the signed mirror list, the release some mirrors serve
/// (`listed[i]` for mirror `i`; missing or `None`: not stated). Those mirrors are not asked:
/// when the stated releases already give `need` mirrors for one, the newest such release is
/// taken without asking any mirror what it serves (only its manifest is fetched, from one of
/// them, unless kept from the last session); mirrors the list says nothing of are asked as
/// before.
pub async fn choose_release_listed<T: Transport, R: Rng + ?Sized>(
    transport: &T,
    mirrors: &[MirrorInfo],
    listed: &[Option<ListedRelease>],
    vendor: &PublicKey,
    need: usize,
    freshness: Option<&Freshness>,
    rng: &mut R,
) -> Result<ChosenRelease, UpdateError> {
    // The manifest kept from the last session is most likely the one to use: check its
    // signature (a few ms for a large release) while the mirrors are asked.
    let mut checking = freshness.and_then(Freshness::kept).map(|(id, bytes)| {
        let vendor = *vendor;
        std::thread::spawn(move || {
            let manifest = Manifest::decode_verified(&bytes, &vendor);
            (id, bytes, manifest)
        })
    });
    let mut unasked = mirror_order(&[&(0..mirrors.len()).collect::<Vec<_>>()], rng);
    let mut asked = Asked::default();
    let mut kept = None;
    // What the list states counts as asked; the first round then asks nobody.
    let mut stated = false;
    for (i, release) in listed.iter().enumerate().take(mirrors.len()) {
        if let Some(release) = release {
            asked.record(i, Ok((vec![release.info()], None)), &mirrors[i].url);
            unasked.retain(|&u| u != i);
            stated = true;
        }
    }
    loop {
        let take = if stated {
            0
        } else {
            need.max(1).min(unasked.len())
        };
        stated = false;
        let wave: Vec<usize> = unasked.drain(..take).collect();
        let lists = futures_join_all(wave.len(), |k| releases_of(transport, wave[k])).await;
        for (&i, list) in wave.iter().zip(lists) {
            asked.record(i, list, &mirrors[i].url);
        }
        if let Some(thread) = checking.take() {
            kept = thread.join().ok();
        }
        let all_asked = unasked.is_empty();
        let found = asked
            .try_candidates(
                transport, mirrors, vendor, need, all_asked, freshness, &mut kept,
            )
            .await;
        if let Some((manifest, release_id, serving)) = found {
            let elsewhere = (0..mirrors.len())
                .filter(|m| !serving.contains(m) && !unasked.contains(m))
                .collect();
            return Ok(ChosenRelease {
                manifest,
                release_id,
                mirrors: Tiers {
                    serving,
                    unasked,
                    elsewhere,
                },
            });
        }
        if all_asked {
            return Err(asked.into_error());
        }
    }
}

/// A kept manifest: its id, bytes, and the result of checking them.
type Kept = Option<([u8; 32], Vec<u8>, Result<Manifest, UpdateError>)>;

impl Asked {
    /// Notes what mirror `i` (at `url`) said it serves.
    fn record(
        &mut self,
        i: usize,
        list: Result<(Vec<pir_service::ReleaseInfo>, Option<Vec<u8>>), pir_client::TransportError>,
        url: &str,
    ) {
        match list {
            Ok((infos, manifest)) => {
                if let (Some(bytes), Some(info)) = (manifest, infos.first()) {
                    if !self.sent.iter().any(|(id, _)| *id == info.id) {
                        self.sent.push((info.id, bytes));
                    }
                }
                for info in infos {
                    match self.candidates.iter_mut().find(|c| c.0 == info.id) {
                        Some(c) => c.2.push(i),
                        None => self.candidates.push((info.id, info.version, vec![i])),
                    }
                }
            }
            Err(e) => {
                tracing::warn!(mirror = %url, "no releases list, used only as a last spare: {e}");
                self.failures.push(format!("{url}: {e}"));
            }
        }
    }

    /// The newest release served by `need` of the mirrors asked (any, once `all_asked`) whose
    /// manifest checks out, with the mirrors serving it.
    #[allow(clippy::too_many_arguments)] // one call site; the pieces are unrelated
    async fn try_candidates<T: Transport>(
        &mut self,
        transport: &T,
        mirrors: &[MirrorInfo],
        vendor: &PublicKey,
        need: usize,
        all_asked: bool,
        freshness: Option<&Freshness>,
        kept: &mut Kept,
    ) -> Option<(Manifest, [u8; 32], Vec<usize>)> {
        // Served by enough mirrors first, then newest, then most widely served.
        self.candidates.sort_by_key(|(_, version, serving)| {
            (
                serving.len() < need,
                std::cmp::Reverse(*version),
                std::cmp::Reverse(serving.len()),
            )
        });
        let candidates = self.candidates.clone();
        for (id, _, serving) in candidates {
            if (serving.len() < need && !all_asked) || self.stale_ids.contains(&id) {
                continue;
            }
            let Some((bytes, manifest)) = self
                .manifest_of(&id, &serving, transport, mirrors, vendor, kept)
                .await
            else {
                continue;
            };
            if let Some(freshness) = freshness {
                if let Err(e) = freshness.check(&manifest, crate::freshness::now_unix()) {
                    self.stale.get_or_insert(e);
                    self.stale_ids.push(id);
                    continue;
                }
                freshness.keep_manifest(&id, &bytes);
            }
            return Some((manifest, id, serving));
        }
        None
    }

    /// The checked manifest of release `id`: the kept one if it is this release, else one that a
    /// mirror sent or sends.
    async fn manifest_of<T: Transport>(
        &mut self,
        id: &[u8; 32],
        serving: &[usize],
        transport: &T,
        mirrors: &[MirrorInfo],
        vendor: &PublicKey,
        kept: &mut Kept,
    ) -> Option<(Vec<u8>, Manifest)> {
        if let Some((kept_id, bytes, Ok(manifest))) = kept.take() {
            if kept_id == *id {
                return Some((bytes, manifest));
            }
            *kept = Some((kept_id, bytes, Ok(manifest)));
        }
        for &i in serving {
            if self.tried.contains(&(*id, i)) {
                continue;
            }
            self.tried.push((*id, i));
            let already = self.sent.iter().find(|(sent_id, _)| sent_id == id);
            let fetched = match already {
                Some((_, bytes)) => Ok(bytes.clone()),
                None => {
                    pir_client::fetch_manifest_of(transport, i, Some(id), MAX_MANIFEST_BYTES).await
                }
            };
            let from = mirrors[i].url.as_str();
            let bytes = match fetched {
                Ok(bytes) => bytes,
                Err(e) => {
                    self.failures.push(format!("{from}: {e}"));
                    continue;
                }
            };
            if Manifest::release_id(&bytes) != *id {
                self.tampered = true;
                self.failures.push(format!(
                    "{from} sent a manifest that is not the release it listed"
                ));
                continue;
            }
            match Manifest::decode_verified(&bytes, vendor) {
                Ok(manifest) => return Some((bytes, manifest)),
                Err(e) => {
                    tracing::warn!(from, "manifest rejected: {e}");
                    self.tampered = true;
                    self.failures
                        .push(format!("{from} sent a manifest that was rejected: {e}"));
                }
            }
        }
        None
    }

    /// Why no release could be chosen.
    fn into_error(self) -> UpdateError {
        if let Some(stale) = self.stale {
            return stale;
        }
        let message = format!(
            "no mirror sent a valid manifest: {}",
            self.failures.join("; ")
        );
        if self.tampered {
            UpdateError::Signature(message)
        } else {
            UpdateError::Input(message)
        }
    }
}

impl ListedRelease {
    /// As a releases list entry (the expiry is checked on the manifest itself).
    fn info(&self) -> pir_service::ReleaseInfo {
        pir_service::ReleaseInfo {
            id: self.id,
            version: self.version,
            expires_unix: 0,
        }
    }
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
