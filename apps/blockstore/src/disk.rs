//! An oblivious disk: the ORAM client over file stores, with a crash-safe sealed state.
//!
//! Files: `STATE` (the sealed client state: store list, keys, position map, partitions,
//! eviction cache) and `STATE.key` (32 random bytes in hex, mode 0600, written once by
//! [`Disk::init`]). The stores hold only sealed slots.
//!
//! Durability: [`Disk::flush`] runs every queued request, syncs the stores, then replaces
//! `STATE` atomically (`pir_fs::write_atomic`). A write is acknowledged as durable when a
//! flush that follows it returns (a disk's contract, and NBD's: `NBD_CMD_FLUSH`). After a
//! crash, the state is the one of the last flush; the ORAM never rebuilds a level into a
//! region that state references, so everything it points to is intact. Opening bumps the
//! session (new nonces and epochs, made durable before any slot is written) and, if the last
//! session did not close cleanly, rebuilds every partition before serving, so no slot read
//! before the crash is read again.
//!
//! Background shuffling: level rebuilds are jobs the ORAM runs a wave at a time between
//! batches ([`Disk::step`]) and while the caller is idle ([`Disk::shuffle_some`]). A rebuild
//! writes only the region the durable state does not reference and changes nothing the state
//! describes until its last write is done; [`Disk::flush`] finishes every owed rebuild before
//! it syncs the stores and replaces `STATE`, so `STATE` never references a region being
//! rebuilt, and a crash mid-rebuild leaves everything it references intact.

use std::path::{Path, PathBuf};

use pir_core::codec::{check_count, Codec, Reader, Writer};
use pir_keys::PublicKey;
use pir_oram::seal::{open_blob, seal_blob, KEY_LEN, TAG_LEN};
use pir_oram::{state, Answer, Client, Geometry, Op, Oram, OramError, Request, SlotStore};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::files::FileStores;
use crate::remote::RemoteStores;
use crate::room;
use crate::s3::{S3Location, S3Stores};

const STATE_LABEL: &[u8] = b"pir-blockstore state v1";
/// The prologue of the `STATE` file: `"PIRoram1"`, version 1, then the sealed state
/// (nonce ‖ AES-256-GCM ciphertext ‖ tag).
pub const STATE_FILE: pir_core::wire::Prologue = pir_core::wire::Prologue {
    magic: b"PIRoram1",
    version: 1,
};
/// The same layout at version 2, written when the store list names an object store
/// (`s3://`): builds from before object stores refuse it by its version, instead of taking
/// the object store's name for a directory. Version 1 is still written for every other state.
pub const STATE_FILE_OBJECTS: u16 = 2;

/// Nonce bytes before the sealed state (`pir_oram::seal::seal_blob`).
const NONCE_LEN: usize = 12;

/// The `STATE` file: the prologue, then the sealed state (nonce, ciphertext, tag), borrowed.
/// Decoding checks the prologue and that a nonce and a tag are there; opening is
/// `pir_oram::seal::open_blob` under the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateFile<'a> {
    /// 1, or [`STATE_FILE_OBJECTS`] when the store list names an object store.
    pub version: u16,
    /// `nonce [12] | AES-256-GCM ciphertext | tag [16]`.
    pub sealed: &'a [u8],
}

impl<'a> Codec<'a> for StateFile<'a> {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.bytes(STATE_FILE.magic);
        w.u16(self.version);
        w.bytes(self.sealed);
    }

    fn decode(r: &mut Reader<'a>, _: &()) -> Result<Self, pir_core::Error> {
        if r.take(STATE_FILE.magic.len())? != STATE_FILE.magic {
            return Err(pir_core::Error::WrongMagic);
        }
        let version = r.u16()?;
        if version != STATE_FILE.version && version != STATE_FILE_OBJECTS {
            return Err(pir_core::Error::WrongVersion {
                found: version,
                supported: STATE_FILE_OBJECTS,
            });
        }
        let min = NONCE_LEN + TAG_LEN;
        if r.remaining() < min {
            return Err(pir_core::Error::Truncated {
                needed: min - r.remaining(),
            });
        }
        Ok(Self {
            version,
            sealed: r.take(r.remaining())?,
        })
    }
}

/// Checks a `STATE` file ([`StateFile`]) and returns the sealed state after the prologue.
pub fn sealed_state(bytes: &[u8]) -> Result<&[u8], pir_core::Error> {
    StateFile::from_bytes(bytes, &()).map(|file| file.sealed)
}

/// The `STATE` file version for a store list: object stores need [`STATE_FILE_OBJECTS`].
fn state_version(stores: &[StoreSpec]) -> u16 {
    if stores.iter().any(|s| matches!(s, StoreSpec::S3(_))) {
        STATE_FILE_OBJECTS
    } else {
        STATE_FILE.version
    }
}

/// The store list at the head of the state's plaintext (the ORAM state follows it):
/// `count u32 (1..=64) | count x (len u32 (<= 4096) | UTF-8: a directory path,
/// https://HOST:PORT HEXKEY, or s3://BUCKET/PREFIX)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreList(pub Vec<StoreSpec>);

/// Most stores one disk spreads over.
const MAX_STORES: usize = 64;

fn write_store_list(w: &mut Writer, stores: &[StoreSpec]) {
    // At most 64 specs (`Geometry::new`) of at most MAX_STORE_PATH bytes (`Disk::init`).
    w.u32(stores.len() as u32);
    for spec in stores {
        let text = spec.encode();
        w.u32(text.len() as u32);
        w.bytes(text.as_bytes());
    }
}

impl Codec<'_> for StoreList {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        write_store_list(w, &self.0);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, pir_core::Error> {
        let count = r.u32()? as usize;
        if count == 0 {
            return Err(pir_core::Error::Malformed("a state with no store".into()));
        }
        check_count(r, "stores", count, MAX_STORES, 4)?;
        let stores = (0..count)
            .map(|_| {
                let len = r.u32()? as usize;
                if len > MAX_STORE_PATH {
                    return Err(pir_core::Error::Oversized {
                        len,
                        limit: MAX_STORE_PATH,
                    });
                }
                let text = std::str::from_utf8(r.take(len)?)
                    .map_err(|_| pir_core::Error::Malformed("a store that is not UTF-8".into()))?;
                StoreSpec::decode(text).ok_or_else(|| {
                    pir_core::Error::Malformed(if text.starts_with("s3://") {
                        "an object store with a bad bucket or prefix".into()
                    } else {
                        "a remote store with a bad key".into()
                    })
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self(stores))
    }
}
const MAX_STORE_PATH: usize = 4096;

/// Errors of the disk layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiskError {
    /// The ORAM refused or detected something.
    #[error(transparent)]
    Oram(#[from] OramError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DiskError + '_ {
    move |source| DiskError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The key file beside a state file: `STATE.key`.
pub fn key_path(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// Where one store is: a local directory, or a `pir oram store` server and its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSpec {
    /// A directory on this machine (any file system, a network mount included).
    Dir(PathBuf),
    /// A remote store, pinned to its Ed25519 key.
    Remote {
        /// `https://HOST:PORT`.
        url: String,
        /// The store's public key.
        key: PublicKey,
    },
    /// An S3-compatible object store ([`crate::s3`]); its endpoint and credentials come from
    /// the environment, never from the state.
    S3(S3Location),
}

impl StoreSpec {
    /// Parses a `--store` argument: `DIR`, `https://HOST:PORT=STORE.pub` (the key file), or
    /// `s3://BUCKET/PREFIX`.
    pub fn parse(arg: &str) -> Result<StoreSpec, DiskError> {
        if arg.starts_with("s3://") {
            return S3Location::parse(arg).map(StoreSpec::S3).ok_or_else(|| {
                DiskError::Usage(format!(
                    "'{arg}': an object store is s3://BUCKET/PREFIX (a bucket of 3 to 63 \
                     lowercase letters, digits, dots and dashes; a prefix without empty parts)"
                ))
            });
        }
        if arg.starts_with("https://") {
            let (url, key_file) = arg.split_once('=').ok_or_else(|| {
                DiskError::Usage(format!(
                    "'{arg}': a remote store is https://HOST:PORT=STORE.pub"
                ))
            })?;
            let key = PublicKey::load(Path::new(key_file))
                .map_err(|e| DiskError::Usage(format!("store key {key_file}: {e}")))?;
            return Ok(StoreSpec::Remote {
                url: url.to_string(),
                key,
            });
        }
        let dir = std::path::absolute(arg).map_err(io(Path::new(arg)))?;
        Ok(StoreSpec::Dir(dir))
    }

    fn encode(&self) -> String {
        match self {
            StoreSpec::Dir(dir) => dir.to_string_lossy().into_owned(),
            StoreSpec::Remote { url, key } => format!("{url} {}", key.to_text().trim()),
            StoreSpec::S3(location) => location.to_text(),
        }
    }

    fn decode(text: &str) -> Option<StoreSpec> {
        // Directories are kept absolute, so `s3://` never begins one.
        if text.starts_with("s3://") {
            return S3Location::parse(text).map(StoreSpec::S3);
        }
        if text.starts_with("https://") {
            let (url, key) = text.split_once(' ')?;
            return Some(StoreSpec::Remote {
                url: url.to_string(),
                key: PublicKey::from_text(key).ok()?,
            });
        }
        Some(StoreSpec::Dir(PathBuf::from(text)))
    }
}

/// The client (owner) key beside a state file: `STATE.client.key`, its public half
/// `STATE.client.pub`. Remote stores serve only the holder of this key.
pub fn client_key_path(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".client.key");
    PathBuf::from(name)
}

/// The public half of [`client_key_path`]: `STATE.client.pub`, what `pir oram store --owner`
/// takes.
pub fn client_pub_path(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".client.pub");
    PathBuf::from(name)
}

/// Makes the owner key of `state` if it has none (secret mode 0600, never overwritten);
/// returns its public half and whether it was made now.
pub fn make_client_key(state: &Path) -> Result<(PublicKey, bool), DiskError> {
    let secret = client_key_path(state);
    let usage = |e: pir_keys::KeyError| DiskError::Usage(format!("the owner key: {e}"));
    if secret.exists() {
        let key = pir_keys::SecretKey::load(&secret).map_err(usage)?;
        let public = client_pub_path(state);
        if !public.exists() {
            key.public().save(&public).map_err(usage)?;
        }
        return Ok((key.public(), false));
    }
    let key = pir_keys::SecretKey::generate().map_err(usage)?;
    key.save(&secret).map_err(usage)?;
    key.public().save(&client_pub_path(state)).map_err(usage)?;
    Ok((key.public(), true))
}

fn load_client_key(state: &Path) -> Result<pir_keys::SecretKey, DiskError> {
    let path = client_key_path(state);
    if !path.exists() {
        let stem = state.display();
        return Err(DiskError::Usage(format!(
            "remote stores serve only their owner, and the owner key {} is missing: make it with \
             `pir oram owner --state {stem}`, start (or restart) every `pir oram store` of this \
             state with `--owner {}`, then run this again",
            path.display(),
            client_pub_path(state).display()
        )));
    }
    pir_keys::SecretKey::load(&path)
        .map_err(|e| DiskError::Usage(format!("the owner key {}: {e}", path.display())))
}

/// Opens the stores of `specs` (all directories, all remote, or all object stores) as one
/// slot store.
fn open_stores(
    state: &Path,
    specs: &[StoreSpec],
    geometry: &Geometry,
    runtime: Option<&tokio::runtime::Handle>,
    create: bool,
) -> Result<Box<dyn SlotStore + Send>, DiskError> {
    let objects: Vec<S3Location> = specs
        .iter()
        .filter_map(|s| match s {
            StoreSpec::S3(location) => Some(location.clone()),
            _ => None,
        })
        .collect();
    if !objects.is_empty() {
        if objects.len() != specs.len() {
            return Err(DiskError::Usage(
                "use only one kind of store: directories, remote stores or object stores".into(),
            ));
        }
        let runtime = runtime.ok_or(DiskError::Usage(
            "object stores need an async runtime".into(),
        ))?;
        let stores = S3Stores::new(&objects, geometry, runtime.clone())?;
        if create {
            stores.format()?;
        }
        stores.check()?;
        return Ok(Box::new(stores));
    }
    let dirs: Vec<PathBuf> = specs
        .iter()
        .filter_map(|s| {
            if let StoreSpec::Dir(d) = s {
                Some(d.clone())
            } else {
                None
            }
        })
        .collect();
    if dirs.len() == specs.len() {
        if create {
            FileStores::create(&dirs, geometry)?;
        }
        return Ok(Box::new(FileStores::open(&dirs, geometry)?));
    }
    let remote: Vec<(String, PublicKey)> = specs
        .iter()
        .filter_map(|s| {
            if let StoreSpec::Remote { url, key } = s {
                Some((url.clone(), *key))
            } else {
                None
            }
        })
        .collect();
    if remote.len() != specs.len() {
        return Err(DiskError::Usage(
            "use either only directories or only remote stores".into(),
        ));
    }
    let runtime = runtime.ok_or(DiskError::Usage(
        "remote stores need an async runtime".into(),
    ))?;
    let client = load_client_key(state)?;
    let stores = RemoteStores::new(&remote, &client, geometry.sealed_slot(), runtime.clone())?;
    let slots: Vec<u64> = (0..geometry.stores)
        .map(|i| geometry.store_bytes(i) / geometry.sealed_slot())
        .collect();
    if create {
        stores.format(&slots)?;
    }
    stores.check(&slots)?;
    Ok(Box::new(stores))
}

/// An open oblivious disk.
pub struct Disk {
    client: Client<Box<dyn SlotStore + Send>, ChaCha20Rng>,
    state_path: PathBuf,
    key: [u8; KEY_LEN],
    stores: Vec<StoreSpec>,
    recovered: bool,
    next_id: u64,
}

impl Disk {
    /// Creates a disk of `size` bytes in blocks of `block_size` on the stores (formatting
    /// them), its state file and its key file. Refuses to overwrite any of them. Remote
    /// stores need `runtime` (call from outside it, e.g. in `spawn_blocking`).
    pub fn init(
        state: &Path,
        size: u64,
        block_size: u32,
        stores: &[StoreSpec],
        runtime: Option<&tokio::runtime::Handle>,
    ) -> Result<Geometry, DiskError> {
        if size == 0 || !size.is_multiple_of(u64::from(block_size)) {
            return Err(DiskError::Usage(format!(
                "the size ({size} bytes) must be a positive multiple of the block size ({block_size} bytes)"
            )));
        }
        if stores.is_empty() {
            return Err(DiskError::Usage("give at least one --store".into()));
        }
        if let Some(long) = stores.iter().find(|s| s.encode().len() > MAX_STORE_PATH) {
            return Err(DiskError::Usage(format!(
                "{long:?}: a store is named in at most {MAX_STORE_PATH} bytes"
            )));
        }
        let key_file = key_path(state);
        for existing in [state, key_file.as_path()] {
            if existing.exists() {
                return Err(DiskError::Usage(format!(
                    "{} exists; refusing to overwrite a store's state or key",
                    existing.display()
                )));
            }
        }
        let geometry = Geometry::new(
            block_size,
            size / u64::from(block_size),
            stores.len() as u32,
        )?;
        let mut rng = ChaCha20Rng::from_rng(&mut rand::rng());
        let oram = Oram::create(geometry.clone(), &mut rng)?;
        let reserve = reserve_len(state::encode(&oram, true).len() as u64);
        check_room(state, stores, &geometry, reserve)?;
        open_stores(state, stores, &geometry, runtime, true)?;
        let mut key = [0u8; KEY_LEN];
        rng.fill_bytes(&mut key);
        pir_fs::write_new_private(&key_file, format!("{}\n", hex::encode(key)).as_bytes())
            .map_err(io(&key_file))?;
        write_state(state, &key, stores, &oram, true, &mut rng)?;
        room::keep_reserve(state, reserve);
        Ok(geometry)
    }

    /// Opens a disk: reads the key, opens and checks the state, starts a durable new session,
    /// and rebuilds every partition if the last session did not close cleanly.
    pub fn open(state: &Path, runtime: Option<&tokio::runtime::Handle>) -> Result<Disk, DiskError> {
        let key_file = key_path(state);
        let text = std::fs::read_to_string(&key_file).map_err(io(&key_file))?;
        let mut key = [0u8; KEY_LEN];
        hex::decode_to_slice(text.trim(), &mut key).map_err(|_| {
            DiskError::Usage(format!("{} is not a 64-digit hex key", key_file.display()))
        })?;
        let file = std::fs::read(state).map_err(io(state))?;
        let sealed = sealed_state(&file).map_err(|e| {
            DiskError::Usage(format!(
                "{} is not a pir oram state file: {e}",
                state.display()
            ))
        })?;
        let plain = open_blob(&key, STATE_LABEL, sealed.to_vec())?;
        let (stores, core) = decode_wrapper(&plain)?;
        let mut oram = state::decode(core)?;
        let recovered = !oram.was_clean();
        oram.begin_session()?;
        let files = open_stores(state, &stores, oram.geometry(), runtime, false)?;
        let rng = ChaCha20Rng::from_rng(&mut rand::rng());
        let mut disk = Disk {
            client: Client::new(oram, files, rng),
            state_path: state.to_path_buf(),
            key,
            stores,
            recovered,
            next_id: 0,
        };
        // The new session number is durable before any slot is sealed with it.
        disk.commit(false)?;
        room::keep_reserve(state, reserve_len(file.len() as u64));
        if recovered {
            disk.client.reshuffle_all()?;
            disk.commit(false)?;
        }
        Ok(disk)
    }

    /// Whether opening found an unclean shutdown and rebuilt the partitions.
    pub fn recovered(&self) -> bool {
        self.recovered
    }

    /// The ORAM shape.
    pub fn geometry(&self) -> &Geometry {
        self.client.oram.geometry()
    }

    /// Logical size in bytes.
    pub fn size(&self) -> u64 {
        self.geometry().logical_bytes()
    }

    /// The ORAM (counters, cache size).
    pub fn oram(&self) -> &Oram {
        &self.client.oram
    }

    /// The largest eviction cache seen.
    pub fn peak_cache(&self) -> usize {
        self.client.peak_cache
    }

    /// Queues a block request (answered by [`Disk::step`]).
    pub fn submit(&mut self, request: Request) -> Result<(), DiskError> {
        Ok(self.client.oram.submit(request)?)
    }

    /// Runs one batch of queued requests.
    pub fn step(&mut self) -> Result<Vec<Answer>, DiskError> {
        Ok(self.client.step()?)
    }

    /// Requests queued.
    pub fn pending(&self) -> usize {
        self.client.oram.pending_len()
    }

    /// Evictions (level rebuilds) owed: queued or running in the background.
    pub fn shuffle_owed(&self) -> usize {
        self.client.oram.shuffle_owed()
    }

    /// Runs one wave of owed shuffle I/O (for a caller with nothing else to do); returns
    /// whether there was any.
    pub fn shuffle_some(&mut self) -> Result<bool, DiskError> {
        Ok(self.client.shuffle(true)?)
    }

    fn commit(&mut self, clean: bool) -> Result<(), DiskError> {
        self.client.sync()?;
        let mut rng = ChaCha20Rng::from_rng(&mut rand::rng());
        write_state(
            &self.state_path,
            &self.key,
            &self.stores,
            &self.client.oram,
            clean,
            &mut rng,
        )?;
        self.client.oram.mark_durable();
        Ok(())
    }

    /// Runs every queued request and makes all of them durable (every owed rebuild is
    /// finished first: `STATE` never references a region being rebuilt).
    pub fn flush(&mut self) -> Result<Vec<Answer>, DiskError> {
        let mut answers = Vec::new();
        while self.pending() > 0 {
            answers.extend(self.step()?);
        }
        self.commit(false)?;
        Ok(answers)
    }

    /// Flushes and marks the state clean (the next open needs no rebuild).
    pub fn close(mut self) -> Result<(), DiskError> {
        let answers = self.flush()?;
        debug_assert!(answers.is_empty());
        self.commit(true)
    }

    fn check_range(&self, offset: u64, len: u64) -> Result<(), DiskError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size() => Ok(()),
            _ => Err(DiskError::Usage(format!(
                "bytes {offset}..{offset}+{len} are past the end of the disk ({} bytes)",
                self.size()
            ))),
        }
    }

    /// Splits a byte range into (block, offset in block, length) pieces.
    pub fn pieces(&self, offset: u64, len: u64) -> Vec<(u32, u32, u32)> {
        let b = u64::from(self.geometry().block_size);
        let mut out = Vec::new();
        let mut at = offset;
        let end = offset + len;
        while at < end {
            let within = at % b;
            let take = (b - within).min(end - at);
            out.push(((at / b) as u32, within as u32, take as u32));
            at += take;
        }
        out
    }

    /// Queues the block requests of a byte-range read; returns their ids in order.
    pub fn submit_read(
        &mut self,
        offset: u64,
        len: u64,
    ) -> Result<Vec<(u64, u32, u32)>, DiskError> {
        self.check_range(offset, len)?;
        let mut ids = Vec::new();
        for (block, within, take) in self.pieces(offset, len) {
            let id = self.next_id;
            self.next_id += 1;
            self.submit(Request {
                id,
                block,
                op: Op::Read,
            })?;
            ids.push((id, within, take));
        }
        Ok(ids)
    }

    /// Queues the block requests of a byte-range write; returns their ids.
    pub fn submit_write(&mut self, offset: u64, data: &[u8]) -> Result<Vec<u64>, DiskError> {
        self.check_range(offset, data.len() as u64)?;
        let b = self.geometry().block_size;
        let mut ids = Vec::new();
        let mut used = 0usize;
        for (block, within, take) in self.pieces(offset, data.len() as u64) {
            let bytes = data[used..used + take as usize].to_vec();
            used += take as usize;
            let op = if take == b {
                Op::Write(bytes)
            } else {
                Op::Patch {
                    offset: within,
                    bytes,
                }
            };
            let id = self.next_id;
            self.next_id += 1;
            self.submit(Request { id, block, op })?;
            ids.push(id);
        }
        Ok(ids)
    }

    /// Reads `len` bytes at `offset` (runs the queue until they are answered).
    pub fn read_at(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, DiskError> {
        let ids = self.submit_read(offset, len)?;
        let mut answers = std::collections::HashMap::new();
        while self.pending() > 0 {
            for a in self.step()? {
                answers.insert(a.id, a.data);
            }
        }
        let mut out = Vec::with_capacity(len as usize);
        for (id, within, take) in ids {
            let block = answers
                .get(&id)
                .ok_or(OramError::Internal("a read was not answered"))?;
            out.extend_from_slice(&block[within as usize..(within + take) as usize]);
        }
        Ok(out)
    }

    /// Writes `data` at `offset` (runs the queue; durable after the next [`Disk::flush`]).
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), DiskError> {
        self.submit_write(offset, data)?;
        while self.pending() > 0 {
            self.step()?;
        }
        Ok(())
    }

    /// Replaces the open stores with what `wrap` makes of them (given the store list and the
    /// shape): the device benchmark reopens them with `O_DIRECT` and counts and delays their
    /// requests ([`crate::direct`]). Call between batches; what it returns must hold the
    /// same slots.
    pub fn map_stores(
        &mut self,
        wrap: impl FnOnce(
            Box<dyn SlotStore + Send>,
            &[StoreSpec],
            &Geometry,
        ) -> Result<Box<dyn SlotStore + Send>, DiskError>,
    ) -> Result<(), DiskError> {
        self.client.sync()?;
        let geometry = self.client.oram.geometry().clone();
        let old = std::mem::replace(&mut self.client.store, Box::new(NoStore));
        self.client.store = wrap(old, &self.stores, &geometry)?;
        Ok(())
    }
}

/// The placeholder while [`Disk::map_stores`] swaps the stores: refuses everything.
struct NoStore;

impl SlotStore for NoStore {
    fn read(&mut self, _: &[pir_oram::Extent], _: &mut Vec<u8>) -> Result<(), OramError> {
        Err(OramError::Store("no store while they are replaced".into()))
    }

    fn write(&mut self, _: pir_oram::Extent, _: &[u8]) -> Result<(), OramError> {
        Err(OramError::Store("no store while they are replaced".into()))
    }

    fn sync(&mut self) -> Result<(), OramError> {
        Err(OramError::Store("no store while they are replaced".into()))
    }
}

fn write_state(
    path: &Path,
    key: &[u8; KEY_LEN],
    stores: &[StoreSpec],
    oram: &Oram,
    clean: bool,
    rng: &mut ChaCha20Rng,
) -> Result<(), DiskError> {
    let core = state::encode(oram, clean);
    let mut plain = Writer::with_capacity(core.len() + 256);
    write_store_list(&mut plain, stores);
    plain.bytes(&core);
    let mut nonce = [0u8; NONCE_LEN];
    rng.fill_bytes(&mut nonce);
    let sealed = seal_blob(key, nonce, STATE_LABEL, &plain.into_bytes())?;
    let bytes = StateFile {
        version: state_version(stores),
        sealed: &sealed,
    }
    .to_bytes();
    match pir_fs::write_atomic_bytes(path, &bytes) {
        Err(e) if room::is_full(&e) && room::reserve_path(path).exists() => {
            // The disk is full: give back the reserve made for this moment, and try again.
            let _ = std::fs::remove_file(room::reserve_path(path));
            pir_fs::write_atomic_bytes(path, &bytes).map_err(io(path))
        }
        other => other.map_err(io(path)),
    }
}

/// The reserve for a state of `state_len` bytes: room for the temporary copy of a state that
/// has grown (the eviction cache varies), with a margin.
fn reserve_len(state_len: u64) -> u64 {
    state_len.saturating_mul(2).saturating_add(1 << 20)
}

/// Refuses to create a store whose file systems lack the room it will take: the slot files of
/// directory stores, the state, its temporary copy and its reserve.
fn check_room(
    state: &Path,
    stores: &[StoreSpec],
    geometry: &Geometry,
    reserve: u64,
) -> Result<(), DiskError> {
    let mut needs = vec![(state.to_path_buf(), reserve.saturating_mul(2))];
    for (i, spec) in stores.iter().enumerate() {
        if let StoreSpec::Dir(dir) = spec {
            needs.push((dir.clone(), geometry.store_bytes(i as u32)));
        }
    }
    match room::check(&needs) {
        Ok(None) => Ok(()),
        Ok(Some(short)) => Err(DiskError::Usage(format!("not enough disk space: {short}"))),
        Err(e) => Err(DiskError::Io {
            path: state.display().to_string(),
            source: e,
        }),
    }
}

fn decode_wrapper(plain: &[u8]) -> Result<(Vec<StoreSpec>, &[u8]), DiskError> {
    let mut r = Reader::new(plain);
    let stores = StoreList::decode(&mut r, &()).map_err(|e| {
        DiskError::Oram(OramError::State(format!("the store list is damaged: {e}")))
    })?;
    let core = r.take(r.remaining()).map_err(OramError::StateFormat)?;
    Ok((stores.0, core))
}
