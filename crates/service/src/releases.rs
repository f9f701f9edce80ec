//! Several releases on one mirror, and a new one picked up without a restart.
//!
//! A [`ReleaseSet`] is a [`Handler`] over one signed service per release (a [`MirrorService`]
//! by default; any [`Backend`], e.g. one Checklist bucket per "release"). Every query batch
//! names its release id (`pir_core::protocol`), so each request goes to the release it was made
//! for: a client finishes a fetch against the release it started with while the mirror already
//! serves the next one. Requests for the same release are still answered in one pass.
//!
//! ```text
//! ReleasesRequest (control, empty body)  -> Releases: count u16 | count x (id [32] | version u64 | expires_unix u64)
//! ManifestRequest (control, empty body)  -> the newest release's manifest
//! ManifestRequest (control, id [32])     -> that release's manifest, or WrongDatabase
//! Query (batch naming id)                -> that release's service (an unknown id: the newest
//!                                           one's refusal, which names the release it serves)
//! ```
//!
//! The releases list is unsigned: it is a hint a client uses to choose a release every mirror
//! serves; the manifest it then fetches is checked against the vendor key and the id.
//!
//! [`ReleaseSet::update`] installs a new set of releases. A release that is no longer wanted is
//! not dropped at once: it is retired, still served for a grace period so that fetches in
//! progress finish, and dropped by [`ReleaseSet::prune`] afterwards.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use pir_core::codec::{check_count, Codec};
use pir_core::wire::{self, MessageKind, Reader, Writer};
use pir_core::{Error, SchemeId};

use crate::signed::{Backend, SignedService};
#[cfg(doc)]
use crate::MirrorService;
use crate::{framing, Handler, Metrics, Mirror, Refusal, Reply, DATABASE_ID_LEN};

/// Most releases one mirror serves at once (and one releases list carries).
pub const MAX_RELEASES: usize = 64;

/// What a mirror says of one release it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseInfo {
    /// SHA-256 of the signed manifest.
    pub id: [u8; DATABASE_ID_LEN],
    /// The manifest's release version.
    pub version: u64,
    /// The manifest's expiry, seconds since 1970.
    pub expires_unix: u64,
}

/// One release being served.
pub struct ServedRelease<B: Backend = Mirror> {
    /// What the releases list says of it.
    pub info: ReleaseInfo,
    /// Its signed service.
    pub service: Arc<SignedService<B>>,
    /// When it stops being served (set once it is replaced).
    retire_at: Option<Instant>,
}

impl<B: Backend> Clone for ServedRelease<B> {
    fn clone(&self) -> Self {
        Self {
            info: self.info,
            service: self.service.clone(),
            retire_at: self.retire_at,
        }
    }
}

impl<B: Backend> ServedRelease<B> {
    /// Whether it has been replaced and is served only until its grace period ends.
    pub fn is_retired(&self) -> bool {
        self.retire_at.is_some()
    }

    /// A release to serve.
    pub fn new(info: ReleaseInfo, service: Arc<SignedService<B>>) -> Self {
        Self {
            info,
            service,
            retire_at: None,
        }
    }
}

/// A releases list body: `count u16 (<= MAX_RELEASES) | count x (id [32] | version u64 |
/// expires_unix u64)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReleaseList(pub Vec<ReleaseInfo>);

/// Bytes of one entry of a releases list.
const RELEASE_ENTRY_LEN: usize = DATABASE_ID_LEN + 16;

impl Codec<'_> for ReleaseList {
    type Context = ();

    /// Writes at most [`MAX_RELEASES`] entries (a mirror never serves more).
    fn encode(&self, w: &mut Writer) {
        let count = self.0.len().min(MAX_RELEASES);
        w.u16(count as u16);
        for release in &self.0[..count] {
            w.bytes(&release.id);
            w.u64(release.version);
            w.u64(release.expires_unix);
        }
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        let count = usize::from(r.u16()?);
        check_count(r, "release count", count, MAX_RELEASES, RELEASE_ENTRY_LEN)?;
        let mut releases = Vec::with_capacity(count);
        for _ in 0..count {
            releases.push(ReleaseInfo {
                id: r.array()?,
                version: r.u64()?,
                expires_unix: r.u64()?,
            });
        }
        Ok(Self(releases))
    }
}

/// Encodes a releases list body ([`ReleaseList`]).
pub fn encode_releases(releases: &[ReleaseInfo]) -> Vec<u8> {
    let count = releases.len().min(MAX_RELEASES);
    let mut w = Writer::with_capacity(2 + count * RELEASE_ENTRY_LEN);
    ReleaseList(releases[..count].to_vec()).encode(&mut w);
    w.into_bytes()
}

/// Decodes a releases list body (untrusted bytes from a mirror; [`ReleaseList`]).
pub fn decode_releases(body: &[u8]) -> Result<Vec<ReleaseInfo>, Error> {
    ReleaseList::from_bytes(body, &()).map(|list| list.0)
}

/// The releases of one mirror, behind one [`Handler`].
pub struct ReleaseSet<B: Backend = Mirror> {
    releases: RwLock<Arc<Vec<ServedRelease<B>>>>,
    /// What `GET /pir/v1/hint` serves for the whole set (an application's index of its
    /// databases), if anything.
    download: RwLock<Option<bytes::Bytes>>,
    metrics: Arc<Metrics>,
}

impl<B: Backend> std::fmt::Debug for ReleaseSet<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseSet")
            .field("releases", &self.current().len())
            .finish()
    }
}

/// Where one request goes.
enum Route {
    Release(usize),
    Direct(Reply),
}

impl<B: Backend> ReleaseSet<B> {
    /// Serves `releases` (at least one), counting into `metrics`, which every release's service
    /// must share (see [`crate::SignedService::with_metrics`]).
    pub fn new(releases: Vec<ServedRelease<B>>, metrics: Arc<Metrics>) -> Result<Self, Error> {
        check_set(&releases)?;
        Ok(Self {
            releases: RwLock::new(Arc::new(sorted(releases))),
            download: RwLock::new(None),
            metrics,
        })
    }

    /// Serves `download` at `GET /pir/v1/hint` from now on (replacing what was served).
    pub fn set_download(&self, download: Option<bytes::Bytes>) {
        match self.download.write() {
            Ok(mut guard) => *guard = download,
            Err(poisoned) => *poisoned.into_inner() = download,
        }
    }

    /// The shared counters, for the services of releases added later.
    pub fn shared_metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// The releases served now, newest first.
    pub fn current(&self) -> Arc<Vec<ServedRelease<B>>> {
        match self.releases.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The releases list as served.
    pub fn infos(&self) -> Vec<ReleaseInfo> {
        self.current().iter().map(|r| r.info).collect()
    }

    /// Installs `wanted` as the releases to serve. Releases served now but not wanted are kept
    /// for `retire_after`, so fetches in progress finish; a wanted release already served
    /// keeps its service (and takes the new info). Returns the ids added.
    pub fn update(
        &self,
        wanted: Vec<ServedRelease<B>>,
        retire_after: Duration,
    ) -> Result<Vec<[u8; DATABASE_ID_LEN]>, Error> {
        check_set(&wanted)?;
        let now = Instant::now();
        let old = self.current();
        let mut next: Vec<ServedRelease<B>> = Vec::with_capacity(wanted.len() + old.len());
        let mut added = Vec::new();
        for release in wanted {
            match old.iter().find(|o| o.info.id == release.info.id) {
                // The service already running is kept; what the list says of it is the
                // caller's (a version may move on while the database stays).
                Some(existing) => next.push(ServedRelease {
                    info: release.info,
                    service: existing.service.clone(),
                    retire_at: None,
                }),
                None => {
                    added.push(release.info.id);
                    next.push(release);
                }
            }
        }
        for release in old.iter() {
            if !next.iter().any(|n| n.info.id == release.info.id) {
                let retire_at = release.retire_at.unwrap_or(now + retire_after);
                if retire_at > now {
                    next.push(ServedRelease {
                        retire_at: Some(retire_at),
                        ..release.clone()
                    });
                }
            }
        }
        next.truncate(MAX_RELEASES);
        self.install(next);
        Ok(added)
    }

    /// Drops retired releases whose grace period is over; returns how many.
    pub fn prune(&self) -> usize {
        let now = Instant::now();
        let old = self.current();
        if !old.iter().any(|r| r.retire_at.is_some_and(|t| t <= now)) {
            return 0;
        }
        let next: Vec<ServedRelease<B>> = old
            .iter()
            .filter(|r| r.retire_at.is_none_or(|t| t > now))
            .cloned()
            .collect();
        let dropped = old.len() - next.len();
        self.install(next);
        dropped
    }

    fn install(&self, releases: Vec<ServedRelease<B>>) {
        let releases = Arc::new(sorted(releases));
        match self.releases.write() {
            Ok(mut guard) => *guard = releases,
            Err(poisoned) => *poisoned.into_inner() = releases,
        }
    }

    /// Where `request` goes among `releases` (never empty).
    fn route(&self, request: &[u8], releases: &[ServedRelease<B>]) -> Route {
        let max = releases
            .iter()
            .map(|r| r.service.max_request_bytes())
            .max()
            .unwrap_or(0);
        let Ok(envelope) = wire::decode_envelope(request, max) else {
            // The newest release's service sends the precise refusal.
            return Route::Release(0);
        };
        match (envelope.kind, envelope.body.len()) {
            (MessageKind::ReleasesRequest, 0) => {
                let infos: Vec<ReleaseInfo> = releases.iter().map(|r| r.info).collect();
                Route::Direct(Reply {
                    status: 200,
                    body: wire::encode_envelope(
                        SchemeId::Control,
                        MessageKind::Releases,
                        &encode_releases(&infos),
                    ),
                })
            }
            (MessageKind::ManifestRequest, DATABASE_ID_LEN) => {
                match releases
                    .iter()
                    .position(|r| r.info.id.as_slice() == envelope.body)
                {
                    // The backend's description: for a mirror, its manifest in a control
                    // envelope; for other backends, their own description envelope.
                    Some(k) => Route::Direct(Reply {
                        status: 200,
                        body: releases[k].service.backend().description().to_vec(),
                    }),
                    None => Route::Direct(
                        Refusal::wrong_database(
                            "this server does not serve that release or database (ask for its releases list)",
                        )
                        .reply(),
                    ),
                }
            }
            (MessageKind::Query, len) if len >= DATABASE_ID_LEN => {
                let id = &envelope.body[..DATABASE_ID_LEN];
                Route::Release(
                    releases
                        .iter()
                        .position(|r| r.info.id.as_slice() == id)
                        .unwrap_or(0),
                )
            }
            _ => Route::Release(0),
        }
    }
}

/// Newest first (by version, then expiry).
fn sorted<B: Backend>(mut releases: Vec<ServedRelease<B>>) -> Vec<ServedRelease<B>> {
    releases.sort_by(|a, b| {
        (b.info.version, b.info.expires_unix).cmp(&(a.info.version, a.info.expires_unix))
    });
    releases
}

fn check_set<B: Backend>(releases: &[ServedRelease<B>]) -> Result<(), Error> {
    if releases.is_empty() {
        return Err(Error::Malformed(
            "a mirror serves at least one release".into(),
        ));
    }
    if releases.len() > MAX_RELEASES {
        return Err(Error::OutOfRange {
            field: "releases",
            found: releases.len() as u64,
            limit: MAX_RELEASES as u64,
        });
    }
    for (k, a) in releases.iter().enumerate() {
        if releases[..k].iter().any(|b| b.info.id == a.info.id) {
            return Err(Error::Malformed(format!(
                "release {} is listed twice",
                hex_prefix(&a.info.id)
            )));
        }
    }
    Ok(())
}

fn hex_prefix(id: &[u8; DATABASE_ID_LEN]) -> String {
    id[..8].iter().map(|b| format!("{b:02x}")).collect()
}

impl<B: Backend> Handler for ReleaseSet<B> {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        let releases = self.current();
        let mut replies: Vec<Option<Reply>> = vec![None; requests.len()];
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); releases.len()];
        for (i, request) in requests.iter().enumerate() {
            match self.route(request, &releases) {
                Route::Direct(reply) => {
                    self.metrics
                        .record(request.len(), reply.body.len(), 0, reply.status != 200, 0);
                    replies[i] = Some(reply);
                }
                Route::Release(k) => groups[k].push(i),
            }
        }
        for (k, group) in groups.iter().enumerate() {
            if group.is_empty() {
                continue;
            }
            let batch: Vec<&[u8]> = group.iter().map(|&i| requests[i]).collect();
            for (&i, reply) in group.iter().zip(releases[k].service.handle_many(&batch)) {
                replies[i] = Some(reply);
            }
        }
        replies
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Refusal::internal("no reply").reply()))
            .collect()
    }

    fn max_request_bytes(&self) -> usize {
        self.current()
            .iter()
            .map(|r| r.service.max_request_bytes())
            .max()
            .unwrap_or_else(|| framing::request_bytes(1, 0))
    }

    fn health(&self) -> String {
        let releases = self.current();
        let newest = releases
            .first()
            .map(|r| Handler::health(r.service.as_ref()))
            .unwrap_or_default();
        if releases.len() == 1 {
            newest
        } else {
            format!("{newest} (newest of {} releases served)", releases.len())
        }
    }

    /// Ready when every release served is (a front end's releases share its shards).
    fn ready(&self) -> bool {
        self.current()
            .iter()
            .all(|r| Handler::ready(r.service.as_ref()))
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The shared counters, the gauges of every release served summed by name (a QDP queue
    /// depth per database becomes the server's), and the newest release's own lines (a front
    /// end's per-shard series, which its releases share).
    fn render_metrics(&self) -> String {
        let mut gauges: Vec<crate::metrics::Gauge> = Vec::new();
        for release in self.current().iter() {
            for (name, help, value) in release.service.backend().gauges() {
                match gauges.iter_mut().find(|(n, _, _)| *n == name) {
                    Some(gauge) => gauge.2 += value,
                    None => gauges.push((name, help, value)),
                }
            }
        }
        let mut text = self.metrics.render_with(&gauges);
        if let Some(newest) = self.current().first() {
            text.push_str(&newest.service.backend().metrics_text());
        }
        text
    }

    /// The set's own download if one was set ([`ReleaseSet::set_download`]), else the newest
    /// release's hint.
    fn hint(&self) -> Option<bytes::Bytes> {
        let own = match self.download.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        own.or_else(|| self.current().first().and_then(|r| r.service.hint()))
    }

    /// The hint of the release `id`.
    fn hint_of(&self, id: &[u8; 32]) -> Option<bytes::Bytes> {
        self.current()
            .iter()
            .find(|r| &r.info.id == id)
            .and_then(|r| r.service.hint())
    }

    /// From the newest release.
    fn legacy_file(&self, name: &str) -> Option<bytes::Bytes> {
        self.current().first()?.service.legacy_file(name)
    }

    fn legacy_manifest(&self) -> Option<bytes::Bytes> {
        self.current().first()?.service.legacy_manifest()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

    use super::*;
    use pir_core::{Database, DbShape};

    fn release(id: u8, version: u64, metrics: &Arc<Metrics>) -> ServedRelease {
        let shape = DbShape::new(8, 64).unwrap();
        let bytes: Vec<u8> = (0..8 * 64).map(|i| (i as u8) ^ id).collect();
        let db = Database::from_bytes(shape, &bytes).unwrap();
        let key = pir_keys::SecretKey::generate().unwrap();
        let service = crate::Mirror::plain(db, [id; 32], vec![id; 5])
            .serve(key)
            .with_metrics(metrics.clone());
        let info = ReleaseInfo {
            id: [id; 32],
            version,
            expires_unix: 1_000 + version,
        };
        ServedRelease::new(info, Arc::new(service))
    }

    fn control(kind: MessageKind, body: &[u8]) -> Vec<u8> {
        wire::encode_envelope(SchemeId::Control, kind, body)
    }

    fn reply_of(set: &ReleaseSet, request: &[u8]) -> (MessageKind, Vec<u8>) {
        let reply = set.handle_many(&[request]).remove(0);
        let envelope = wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
        (envelope.kind, envelope.body.to_vec())
    }

    #[test]
    fn lists_routes_by_id_and_retires_replaced_releases() {
        let metrics = Arc::new(Metrics::default());
        let set = ReleaseSet::new(
            vec![release(1, 10, &metrics), release(2, 11, &metrics)],
            metrics.clone(),
        )
        .unwrap();
        // The list, newest first, survives the round trip.
        let (kind, body) = reply_of(&set, &control(MessageKind::ReleasesRequest, &[]));
        assert_eq!(kind, MessageKind::Releases);
        let list = decode_releases(&body).unwrap();
        assert_eq!(list.iter().map(|r| r.version).collect::<Vec<_>>(), [11, 10]);
        // The newest manifest by default, any served one by id, a refusal for another id.
        assert_eq!(
            reply_of(&set, &control(MessageKind::ManifestRequest, &[])).1,
            vec![2; 5]
        );
        assert_eq!(
            reply_of(&set, &control(MessageKind::ManifestRequest, &[1; 32])).1,
            vec![1; 5]
        );
        assert_eq!(
            reply_of(&set, &control(MessageKind::ManifestRequest, &[9; 32])).0,
            MessageKind::Error
        );
        // A query naming release 1 is answered by release 1 (its own signed answer).
        let chor = pir_xor::Chor::new(DbShape::new(8, 64).unwrap(), 2).unwrap();
        let mut rng = <rand_chacha::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(3);
        let (queries, _) = pir_core::MultiServerScheme::query(&chor, &[3], &mut rng).unwrap();
        let body = pir_core::MultiServerScheme::encode_query(&chor, &queries[0]);
        for id in [1u8, 2] {
            let request =
                crate::reply::request(SchemeId::Chor, &[id; 32], std::slice::from_ref(&body));
            let (kind, answer) = reply_of(&set, &request);
            assert_eq!(kind, MessageKind::Answer);
            assert_eq!(&answer[..DATABASE_ID_LEN], &[id; 32]);
        }
        // Replacing release 1 by 3 retires 1 (still served), prune keeps it until its time.
        let added = set
            .update(
                vec![release(2, 11, &metrics), release(3, 12, &metrics)],
                Duration::from_secs(3600),
            )
            .unwrap();
        assert_eq!(added, vec![[3; 32]]);
        assert_eq!(set.prune(), 0);
        let current = set.current();
        assert_eq!(current.len(), 3);
        assert!(current
            .iter()
            .any(|r| r.info.id == [1; 32] && r.is_retired()));
        // With no grace, a replaced release goes at once; one retired before keeps its time.
        set.update(vec![release(3, 12, &metrics)], Duration::ZERO)
            .unwrap();
        let ids: Vec<[u8; 32]> = set.current().iter().map(|r| r.info.id).collect();
        assert_eq!(ids, vec![[3; 32], [1; 32]]);
        assert_eq!(set.prune(), 0);
        // Garbage lists and sets are errors, not panics.
        assert!(decode_releases(&[0xff, 0xff]).is_err());
        assert!(decode_releases(&[1, 0, 1]).is_err());
        assert!(ReleaseSet::<Mirror>::new(Vec::new(), metrics.clone()).is_err());
        assert!(ReleaseSet::new(
            vec![release(4, 1, &metrics), release(4, 1, &metrics)],
            metrics
        )
        .is_err());
    }
}
