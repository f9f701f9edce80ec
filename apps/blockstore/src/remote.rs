//! Remote stores: the server side of the slot-store protocol (`pir oram store`) and the
//! client side ([`RemoteStores`]); the message bodies are `pir_oram::protocol`.
//!
//! A store is dumb and untrusted: it keeps one file of fixed-size slots and reads or writes
//! ranges of them; it never sees a key. Messages are `pir-core` envelopes with scheme
//! `OramStore` (7), kind `Query` from the client and `Answer` (or `Error`) back, over HTTPS
//! pinned to the store's Ed25519 key, like every other `pir` server, and the client proves it
//! holds the owner's key in the same handshake (`pir_keys::tls::server_config_for_client`):
//! anyone else is refused before a request is read, so before a slot is read or written.
//! Body layouts
//! (little-endian):
//! - `FORMAT` (1): slot bytes u32, slots u64. Creates the slot file; repeating it with the
//!   same shape is a no-op, another shape is refused. Reply: empty.
//! - `READ` (2): count u32, then count × (first slot u64, slots u32). Reply: the slots,
//!   concatenated.
//! - `WRITE` (3): count u32, then count × (first slot u64, slots u32), then the slots of
//!   every extent, concatenated. Reply: empty.
//! - `SYNC` (4): makes every write durable (`fdatasync`). Reply: empty.
//! - `INFO` (5): reply slot bytes u32, slots u64 (zeros when not formatted).
//!
//! Every range is checked against the formatted shape before any I/O or allocation.

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pir_client::{HttpsTransport, Transport};
use pir_core::scheme::SchemeId;
use pir_core::wire::{self, ErrorCode, MessageKind, Writer};
use pir_core::Codec;
use pir_keys::PublicKey;
use pir_oram::protocol::{SlotRun, StoreInfo, StoreRequest};
use pir_oram::{Extent, OramError, SlotStore};
use pir_service::{Handler, Metrics, Reply};

/// Largest message body either way: a whole top level of a 64 GiB store at 64 KiB blocks
/// fits with room to spare.
pub const MAX_BODY: usize = 96 << 20;
/// Most extents in one read.
pub const MAX_EXTENTS: usize = 1 << 16;
const META: &str = "store.meta";

struct Shape {
    file: File,
    slot_bytes: u64,
    slots: u64,
}

/// The server side of one store directory.
pub struct StoreService {
    dir: PathBuf,
    shape: Mutex<Option<Shape>>,
    metrics: Metrics,
}

fn refused(message: &str) -> Reply {
    Reply {
        status: 400,
        body: wire::encode_envelope(
            SchemeId::Control,
            MessageKind::Error,
            &wire::encode_error(ErrorCode::BadRequest, message),
        ),
    }
}

fn answer(body: &[u8]) -> Reply {
    Reply {
        status: 200,
        body: wire::encode_envelope(SchemeId::OramStore, MessageKind::Answer, body),
    }
}

impl StoreService {
    /// Serves `dir` (created if missing); a formatted store is opened at once.
    pub fn open(dir: &Path) -> std::io::Result<StoreService> {
        std::fs::create_dir_all(dir)?;
        let service = StoreService {
            dir: dir.to_path_buf(),
            shape: Mutex::new(None),
            metrics: Metrics::default(),
        };
        let meta = dir.join(META);
        if meta.exists() {
            let text = std::fs::read_to_string(&meta)?;
            let (slot_bytes, slots) = parse_meta(&text)
                .ok_or_else(|| std::io::Error::other(format!("{} is damaged", meta.display())))?;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(dir.join(crate::files::SLOT_FILE))?;
            *service.lock() = Some(Shape {
                file,
                slot_bytes,
                slots,
            });
        }
        Ok(service)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Shape>> {
        // A panic while holding the lock cannot leave the shape half-updated: it is replaced
        // whole. Keep serving.
        self.shape.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shape served, if formatted: (slot bytes, slots).
    pub fn shape(&self) -> Option<(u64, u64)> {
        self.lock().as_ref().map(|s| (s.slot_bytes, s.slots))
    }

    fn handle(&self, request: &[u8]) -> Result<Vec<u8>, String> {
        let envelope = wire::decode_envelope(request, MAX_BODY).map_err(|e| e.to_string())?;
        if envelope.scheme != SchemeId::OramStore || envelope.kind != MessageKind::Query {
            return Err("not a slot-store request".into());
        }
        let request =
            StoreRequest::from_bytes(envelope.body, &MAX_EXTENTS).map_err(|e| e.to_string())?;
        let mut shape = self.lock();
        let io = |e: std::io::Error| format!("store I/O: {e}");
        match request {
            StoreRequest::Format { slot_bytes, slots } => {
                self.format(&mut shape, u64::from(slot_bytes), slots)
            }
            StoreRequest::Info => {
                let (slot_bytes, slots) =
                    shape.as_ref().map_or((0, 0), |s| (s.slot_bytes, s.slots));
                // Formatted shapes come from FORMAT, whose slot bytes are a u32.
                let slot_bytes = u32::try_from(slot_bytes).unwrap_or(u32::MAX);
                Ok(StoreInfo { slot_bytes, slots }.to_bytes())
            }
            StoreRequest::Read(runs) => {
                let s = formatted(&shape)?;
                let (ranges, total) = s.ranges(&runs)?;
                if total > MAX_BODY {
                    return Err("a read larger than the reply limit".into());
                }
                let mut out = vec![0u8; total];
                let mut done = 0;
                for (at, len) in ranges {
                    s.file
                        .read_exact_at(&mut out[done..done + len], at)
                        .map_err(io)?;
                    done += len;
                }
                Ok(out)
            }
            StoreRequest::Write { runs, data } => {
                let s = formatted(&shape)?;
                let (ranges, total) = s.ranges(&runs)?;
                // A decoded request has its data in one piece.
                let data: Cow<'_, [u8]> = match data.as_slice() {
                    [one] => Cow::Borrowed(one),
                    pieces => Cow::Owned(pieces.concat()),
                };
                if data.len() != total {
                    return Err("a write whose data does not match its slot counts".into());
                }
                let mut done = 0;
                for (at, len) in ranges {
                    s.file
                        .write_all_at(&data[done..done + len], at)
                        .map_err(io)?;
                    done += len;
                }
                Ok(Vec::new())
            }
            StoreRequest::Sync => {
                formatted(&shape)?.file.sync_data().map_err(io)?;
                Ok(Vec::new())
            }
        }
    }

    /// FORMAT: creates the slot file, or checks the shape is the one already formatted.
    fn format(
        &self,
        shape: &mut Option<Shape>,
        slot_bytes: u64,
        slots: u64,
    ) -> Result<Vec<u8>, String> {
        match shape {
            Some(s) if s.slot_bytes == slot_bytes && s.slots == slots => Ok(Vec::new()),
            Some(_) => Err("this store is already formatted with another shape".into()),
            None => {
                let io = |e: std::io::Error| e.to_string();
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(self.dir.join(crate::files::SLOT_FILE))
                    .map_err(io)?;
                file.set_len(slots * slot_bytes).map_err(io)?;
                file.sync_all().map_err(io)?;
                let meta = format!("pir-oram-store v1\nslot_bytes {slot_bytes}\nslots {slots}\n");
                pir_fs::write_atomic_bytes(&self.dir.join(META), meta.as_bytes()).map_err(io)?;
                *shape = Some(Shape {
                    file,
                    slot_bytes,
                    slots,
                });
                Ok(Vec::new())
            }
        }
    }
}

/// The shape, or the refusal of a request that needs one.
fn formatted(shape: &Option<Shape>) -> Result<&Shape, String> {
    shape
        .as_ref()
        .ok_or_else(|| "the store is not formatted yet (pir oram init formats it)".into())
}

impl Shape {
    /// The byte ranges of `runs` and their total, each checked against the shape.
    fn ranges(&self, runs: &[SlotRun]) -> Result<(Vec<(u64, usize)>, usize), String> {
        let mut total = 0usize;
        let ranges = runs
            .iter()
            .map(|run| match run.first.checked_add(u64::from(run.slots)) {
                Some(end) if end <= self.slots => {
                    let len = run.slots as usize * self.slot_bytes as usize;
                    total = total.saturating_add(len);
                    Ok((run.first * self.slot_bytes, len))
                }
                _ => Err(format!(
                    "slots {}+{} are outside the store ({} slots)",
                    run.first, run.slots, self.slots
                )),
            })
            .collect::<Result<_, String>>()?;
        Ok((ranges, total))
    }
}

fn parse_meta(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines();
    if lines.next()? != "pir-oram-store v1" {
        return None;
    }
    let slot_bytes = lines.next()?.strip_prefix("slot_bytes ")?.parse().ok()?;
    let slots = lines.next()?.strip_prefix("slots ")?.parse().ok()?;
    Some((slot_bytes, slots))
}

impl Handler for StoreService {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        requests
            .iter()
            .map(|request| {
                let started = std::time::Instant::now();
                let reply = match self.handle(request) {
                    Ok(body) => answer(&body),
                    Err(message) => refused(&message),
                };
                self.metrics.record(
                    request.len(),
                    reply.body.len(),
                    1,
                    reply.status != 200,
                    started.elapsed().as_micros() as u64,
                );
                reply
            })
            .collect()
    }

    fn max_request_bytes(&self) -> usize {
        wire::HEADER_LEN + MAX_BODY
    }

    fn health(&self) -> String {
        match self.shape() {
            Some((b, n)) => format!("ok: oblivious slot store, {n} slots of {b} bytes"),
            None => "ok: oblivious slot store, not formatted".into(),
        }
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

/// Stores reached over HTTPS, each pinned to its key; one [`SlotStore`] over all of them.
/// Reads of one batch go to every store at once.
pub struct RemoteStores {
    transport: Arc<HttpsTransport>,
    runtime: tokio::runtime::Handle,
    stores: usize,
    slot_bytes: u64,
}

impl RemoteStores {
    /// Connects lazily to `stores` (URL and key each); `runtime` runs the exchanges (call
    /// from a thread outside the runtime, such as `spawn_blocking`).
    pub fn new(
        stores: &[(String, PublicKey)],
        client: &pir_keys::SecretKey,
        slot_bytes: u64,
        runtime: tokio::runtime::Handle,
    ) -> Result<RemoteStores, OramError> {
        let transport = HttpsTransport::with_client_key(stores, client)
            .map_err(|e| OramError::Store(e.to_string()))?;
        Ok(RemoteStores {
            transport: Arc::new(transport),
            runtime,
            stores: stores.len(),
            slot_bytes,
        })
    }

    async fn exchange(
        transport: Arc<HttpsTransport>,
        store: usize,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, OramError> {
        let request = wire::encode_envelope(SchemeId::OramStore, MessageKind::Query, &body);
        let reply = transport
            .exchange(store, request, wire::HEADER_LEN + MAX_BODY)
            .await
            .map_err(|e| OramError::Store(format!("store {store}: {e}")))?;
        let envelope = wire::decode_envelope(&reply, MAX_BODY)
            .map_err(|e| OramError::Store(format!("store {store}: {e}")))?;
        match envelope.kind {
            MessageKind::Answer if envelope.scheme == SchemeId::OramStore => {
                Ok(envelope.body.to_vec())
            }
            MessageKind::Error => {
                let (_, message) = wire::decode_error(envelope.body)
                    .map_err(|e| OramError::Store(format!("store {store}: {e}")))?;
                Err(OramError::Store(format!(
                    "store {store} refused: {message}"
                )))
            }
            _ => Err(OramError::Store(format!(
                "store {store} sent an unexpected reply"
            ))),
        }
    }

    /// Runs one request on every store in `bodies` at once; replies in order.
    fn all(&self, bodies: Vec<(usize, Vec<u8>)>) -> Result<Vec<Vec<u8>>, OramError> {
        let handles: Vec<_> = bodies
            .into_iter()
            .map(|(store, body)| {
                self.runtime
                    .spawn(Self::exchange(self.transport.clone(), store, body))
            })
            .collect();
        self.runtime.block_on(async move {
            let mut out = Vec::with_capacity(handles.len());
            for handle in handles {
                out.push(
                    handle
                        .await
                        .map_err(|e| OramError::Store(format!("store task failed: {e}")))??,
                );
            }
            Ok(out)
        })
    }

    /// Formats every store for `slots[i]` slots.
    pub fn format(&self, slots: &[u64]) -> Result<(), OramError> {
        let bodies = slots
            .iter()
            .enumerate()
            .map(|(i, &slots)| {
                let request = StoreRequest::Format {
                    // The geometry bounds a sealed slot far below 4 GiB.
                    slot_bytes: u32::try_from(self.slot_bytes).unwrap_or(u32::MAX),
                    slots,
                };
                (i, request.to_bytes())
            })
            .collect();
        self.all(bodies).map(|_| ())
    }

    /// Checks every store holds `slots[i]` slots of the right size.
    pub fn check(&self, slots: &[u64]) -> Result<(), OramError> {
        let info = StoreRequest::Info.to_bytes();
        let replies = self.all((0..self.stores).map(|i| (i, info.clone())).collect())?;
        for (i, reply) in replies.iter().enumerate() {
            let StoreInfo {
                slot_bytes: b,
                slots: n,
            } = StoreInfo::from_bytes(reply, &())
                .map_err(|e| OramError::Store(format!("store {i}: {e}")))?;
            if u64::from(b) != self.slot_bytes || n != slots[i] {
                return Err(OramError::Store(format!(
                    "store {i} holds {n} slots of {b} bytes; this ORAM needs {} of {}: a different or re-formatted store",
                    slots[i], self.slot_bytes
                )));
            }
        }
        Ok(())
    }
}

/// The wire run of an extent (its store is the request's destination).
fn run_of(extent: &Extent) -> SlotRun {
    SlotRun {
        first: extent.first_slot,
        slots: extent.slots,
    }
}

impl SlotStore for RemoteStores {
    fn read(&mut self, extents: &[Extent], out: &mut Vec<u8>) -> Result<(), OramError> {
        let mut per_store: Vec<Vec<(usize, Extent)>> = vec![Vec::new(); self.stores];
        for (i, e) in extents.iter().enumerate() {
            per_store
                .get_mut(e.store as usize)
                .ok_or_else(|| OramError::Store(format!("no store {}", e.store)))?
                .push((i, *e));
        }
        let mut bodies = Vec::new();
        let mut order = Vec::new();
        for (store, list) in per_store.iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            let runs = list.iter().map(|(_, e)| run_of(e)).collect();
            bodies.push((store, StoreRequest::Read(runs).to_bytes()));
            order.push(store);
        }
        let replies = self.all(bodies)?;
        // Scatter each store's concatenated reply back into the requested order.
        let mut pieces: Vec<&[u8]> = vec![&[]; extents.len()];
        for (store, reply) in order.iter().zip(&replies) {
            let want: usize = per_store[*store]
                .iter()
                .map(|(_, e)| e.slots as usize * self.slot_bytes as usize)
                .sum();
            if reply.len() != want {
                return Err(OramError::ShortRead {
                    store: *store as u32,
                    got: reply.len(),
                    want,
                });
            }
            let mut at = 0;
            for (i, e) in &per_store[*store] {
                let len = e.slots as usize * self.slot_bytes as usize;
                pieces[*i] = &reply[at..at + len];
                at += len;
            }
        }
        for piece in pieces {
            out.extend_from_slice(piece);
        }
        Ok(())
    }

    fn write(&mut self, extent: Extent, bytes: &[u8]) -> Result<(), OramError> {
        self.write_many(&[(extent, bytes)])
    }

    fn write_many(&mut self, writes: &[(Extent, &[u8])]) -> Result<(), OramError> {
        let mut bodies = Vec::new();
        for store in 0..self.stores {
            let mine: Vec<&(Extent, &[u8])> = writes
                .iter()
                .filter(|(e, _)| e.store as usize == store)
                .collect();
            if mine.is_empty() {
                continue;
            }
            if mine
                .iter()
                .any(|(e, b)| b.len() as u64 != u64::from(e.slots) * self.slot_bytes)
            {
                return Err(OramError::Store("a write of the wrong size".into()));
            }
            let data: usize = mine.iter().map(|(_, b)| b.len()).sum();
            let request = StoreRequest::Write {
                runs: mine.iter().map(|(e, _)| run_of(e)).collect(),
                data: mine.iter().map(|(_, b)| *b).collect(),
            };
            let mut w = Writer::with_capacity(5 + 12 * mine.len() + data);
            request.encode(&mut w);
            bodies.push((store, w.into_bytes()));
        }
        if writes.iter().any(|(e, _)| e.store as usize >= self.stores) {
            return Err(OramError::Store(
                "a write to a store that does not exist".into(),
            ));
        }
        self.all(bodies).map(|_| ())
    }

    fn sync(&mut self) -> Result<(), OramError> {
        let sync = StoreRequest::Sync.to_bytes();
        self.all((0..self.stores).map(|i| (i, sync.clone())).collect())
            .map(|_| ())
    }
}
