//! A disk over several ORAM nodes behind the oblivious load balancer
//! ([`pir_oram::balance`]): the balancer's sealed, crash-safe state file and its key, the
//! node connections ([`crate::node::NodeClient`]), and byte-range requests as for [`Disk`].
//!
//! Files: `BSTATE` (sealed: the node list with every node's identity, the last durable
//! epoch, and the balancer's state: every block's node and slot, the eviction cache) and
//! `BSTATE.key` (32 random bytes in hex, mode 0600); the nodes serve only the holder of
//! `BSTATE.client.key` (`pir oram owner --state BSTATE` makes it). A node whose identity
//! (`STATE.nodeid`) or epoch does not match is refused at open.
//!
//! Durability, in this order (a crash between any two steps loses no flushed write):
//! 1. every queued request runs;
//! 2. every node flushes (its stores synced, its own state written) and records the new epoch;
//! 3. `BSTATE` is replaced atomically with the new epoch;
//! 4. slots read since the last checkpoint become free for writes.
//!
//! A crash before 3 leaves the last `BSTATE`, whose every slot is intact on its node: nodes
//! are at least at its epoch (2 finished before the previous 3), and since it was written no
//! slot it names was written (4 holds them back). The same runs by itself every
//! `CHECKPOINT_BATCHES` batches, so held-back slots stay within the nodes' capacity bound.
//!
//! [`Disk`]: crate::Disk

use std::path::Path;

use pir_core::codec::{check_count, Reader, Writer};
use pir_keys::PublicKey;
use pir_oram::balance::{self, Balancer};
use pir_oram::seal::{open_blob, seal_blob, KEY_LEN};
use pir_oram::{Answer, Op, OramError, Request};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::device::BlockDevice;
use crate::disk::{client_key_path, client_pub_path, key_path};
use crate::node::NodeClient;
use crate::DiskError;

const LABEL: &[u8] = b"pir-blockstore balancer state v1";
/// The prologue of a `BSTATE` file: `"PIRoBal1"`, version 1, then the sealed state
/// (nonce ‖ AES-256-GCM ciphertext ‖ tag).
pub const BALANCER_FILE: pir_core::wire::Prologue = pir_core::wire::Prologue {
    magic: b"PIRoBal1",
    version: 1,
};
const NONCE_LEN: usize = 12;
const MAX_URL: usize = 4096;

/// A node: `https://HOST:PORT` and its key.
pub type NodeSpec = (String, PublicKey);

/// Parses a `--node` argument: `https://HOST:PORT=NODE.pub` (the node's key file).
pub fn parse_node(arg: &str) -> Result<NodeSpec, DiskError> {
    let usage = || DiskError::Usage(format!("'{arg}': a node is https://HOST:PORT=NODE.pub"));
    let (url, key_file) = arg.split_once('=').ok_or_else(usage)?;
    if !url.starts_with("https://") || url.len() > MAX_URL {
        return Err(usage());
    }
    let key = PublicKey::load(Path::new(key_file))
        .map_err(|e| DiskError::Usage(format!("node key {key_file}: {e}")))?;
    Ok((url.to_string(), key))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DiskError + '_ {
    move |source| DiskError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn state_error(what: String) -> DiskError {
    DiskError::Oram(OramError::State(what))
}

/// An open disk over ORAM nodes.
pub struct Balanced {
    core: Balancer,
    nodes: NodeClient,
    specs: Vec<NodeSpec>,
    /// Every node's identity, as recorded at init.
    ids: Vec<[u8; 16]>,
    state_path: std::path::PathBuf,
    key: [u8; KEY_LEN],
    epoch: u64,
    rng: ChaCha20Rng,
    next_id: u64,
}

fn load_owner(state: &Path) -> Result<pir_keys::SecretKey, DiskError> {
    let path = client_key_path(state);
    if !path.exists() {
        return Err(DiskError::Usage(format!(
            "nodes serve only their owner, and the owner key {} is missing: make it with `pir \
             oram owner --state {}`, start every `pir oram node` with `--owner {}`, then run \
             this again",
            path.display(),
            state.display(),
            client_pub_path(state).display()
        )));
    }
    pir_keys::SecretKey::load(&path)
        .map_err(|e| DiskError::Usage(format!("the owner key {}: {e}", path.display())))
}

impl Balanced {
    /// Creates a balancer of `size` bytes in blocks of `block` over `nodes` (each already
    /// serving an initialised disk of that block size and at least
    /// `balance::node_blocks_needed` blocks), its state file and key. Refuses to overwrite
    /// either. Call from outside `runtime` (e.g. in `spawn_blocking`).
    pub fn init(
        state: &Path,
        size: u64,
        block: u32,
        nodes: &[NodeSpec],
        runtime: &tokio::runtime::Handle,
    ) -> Result<u32, DiskError> {
        if block == 0 || size == 0 || !size.is_multiple_of(u64::from(block)) {
            return Err(DiskError::Usage(format!(
                "the size ({size} bytes) must be a positive multiple of the block size ({block} bytes)"
            )));
        }
        let blocks = u32::try_from(size / u64::from(block))
            .map_err(|_| DiskError::Usage("too many blocks".into()))?;
        let key_file = key_path(state);
        for existing in [state, key_file.as_path()] {
            if existing.exists() {
                return Err(DiskError::Usage(format!(
                    "{} exists; refusing to overwrite a balancer's state or key",
                    existing.display()
                )));
            }
        }
        let client = NodeClient::new(nodes, &load_owner(state)?, runtime.clone())?;
        let infos = client.info()?;
        if let Some((i, info)) = infos
            .iter()
            .enumerate()
            .find(|(_, n)| n.block_size != block)
        {
            return Err(DiskError::Usage(format!(
                "node {i} has blocks of {} bytes, not {block}",
                info.block_size
            )));
        }
        let node_blocks: Vec<u32> = infos.iter().map(|n| n.blocks).collect();
        let mut rng = ChaCha20Rng::from_rng(&mut rand::rng());
        let core = Balancer::create(block, blocks, &node_blocks, &mut rng)?;
        let mut key = [0u8; KEY_LEN];
        rng.fill_bytes(&mut key);
        pir_fs::write_new_private(&key_file, format!("{}\n", hex::encode(key)).as_bytes())
            .map_err(io(&key_file))?;
        let epoch = infos.iter().map(|n| n.epoch).max().unwrap_or(0);
        let mut disk = Balanced {
            core,
            nodes: client,
            specs: nodes.to_vec(),
            ids: infos.iter().map(|n| n.id).collect(),
            state_path: state.to_path_buf(),
            key,
            epoch,
            rng,
            next_id: 0,
        };
        disk.checkpoint()?;
        Ok(node_blocks.iter().copied().min().unwrap_or(0))
    }

    /// Opens a balancer; `nodes`, when given, replace the recorded node list (a node moved or
    /// was replaced by a copy; same count, same shapes, and never older than the last flush).
    pub fn open(
        state: &Path,
        nodes: Option<Vec<NodeSpec>>,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Balanced, DiskError> {
        let key_file = key_path(state);
        let text = std::fs::read_to_string(&key_file).map_err(io(&key_file))?;
        let mut key = [0u8; KEY_LEN];
        hex::decode_to_slice(text.trim(), &mut key).map_err(|_| {
            DiskError::Usage(format!("{} is not a 64-digit hex key", key_file.display()))
        })?;
        let file = std::fs::read(state).map_err(io(state))?;
        let mut r = Reader::new(&file);
        BALANCER_FILE.read(&mut r).map_err(|e| {
            DiskError::Usage(format!("{} is not a balancer state: {e}", state.display()))
        })?;
        let sealed = r.take(r.remaining()).map_err(OramError::StateFormat)?;
        let plain = open_blob(&key, LABEL, sealed.to_vec())?;
        let (recorded, ids, epoch, core) = decode_plain(&plain)?;
        let specs = match nodes {
            Some(given) if given.len() != recorded.len() => {
                return Err(DiskError::Usage(format!(
                    "this balancer has {} nodes; {} --node given",
                    recorded.len(),
                    given.len()
                )))
            }
            Some(given) => given,
            None => recorded,
        };
        let client = NodeClient::new(&specs, &load_owner(state)?, runtime.clone())?;
        for (i, info) in client.info()?.iter().enumerate() {
            if info.block_size != core.block_size() || info.blocks != core.node_blocks()[i] {
                return Err(DiskError::Usage(format!(
                    "node {i} holds {} blocks of {} bytes; this balancer put {} of {} there: \
                     a different node",
                    info.blocks,
                    info.block_size,
                    core.node_blocks()[i],
                    core.block_size()
                )));
            }
            if info.id != ids[i] {
                return Err(DiskError::Usage(format!(
                    "node {i} is another node (identity {}, not {}): give the nodes in their \
                     original order, each the node or a copy of its state, key and .nodeid",
                    hex::encode(info.id),
                    hex::encode(ids[i])
                )));
            }
            if info.epoch < epoch {
                return Err(DiskError::Usage(format!(
                    "node {i} was last flushed at epoch {}, before this balancer's last flush \
                     (epoch {epoch}): it lost flushed writes (an old copy?); restore the node \
                     it replaced",
                    info.epoch
                )));
            }
        }
        Ok(Balanced {
            core,
            nodes: client,
            specs,
            ids,
            state_path: state.to_path_buf(),
            key,
            epoch,
            rng: ChaCha20Rng::from_rng(&mut rand::rng()),
            next_id: 0,
        })
    }

    /// The balancer core (shape, cache, traffic).
    pub fn core(&self) -> &Balancer {
        &self.core
    }

    /// The nodes (URL and key), in order.
    pub fn nodes(&self) -> &[NodeSpec] {
        &self.specs
    }

    /// Flushes every node, then writes the state with the next epoch, then frees held slots.
    fn checkpoint(&mut self) -> Result<(), DiskError> {
        let next = self.epoch + 1;
        self.nodes.flush(next)?;
        let mut plain = Writer::with_capacity(64);
        // At most balance::MAX_NODES nodes, URLs at most MAX_URL bytes (`parse_node`).
        plain.u32(self.specs.len() as u32);
        for (url, key) in &self.specs {
            let text = format!("{url} {}", key.to_text().trim());
            plain.u32(text.len() as u32);
            plain.bytes(text.as_bytes());
        }
        for id in &self.ids {
            plain.bytes(id);
        }
        plain.u64(next);
        plain.bytes(&balance::encode(&self.core));
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill_bytes(&mut nonce);
        let sealed = seal_blob(&self.key, nonce, LABEL, &plain.into_bytes())?;
        let mut w = Writer::with_capacity(sealed.len() + 16);
        BALANCER_FILE.write(&mut w);
        w.bytes(&sealed);
        pir_fs::write_atomic_bytes(&self.state_path, &w.into_bytes())
            .map_err(io(&self.state_path))?;
        self.core.mark_durable();
        self.epoch = next;
        Ok(())
    }

    fn submit(&mut self, block: u32, op: Op) -> Result<u64, DiskError> {
        let id = self.next_id;
        self.next_id += 1;
        self.core.submit(Request { id, block, op })?;
        Ok(id)
    }

    fn pieces(&self, offset: u64, len: u64) -> Result<Vec<(u32, u32, u32)>, DiskError> {
        let b = u64::from(self.core.block_size());
        match offset.checked_add(len) {
            Some(end) if end <= self.size() => {}
            _ => {
                return Err(DiskError::Usage(format!(
                    "bytes {offset}..{offset}+{len} are past the end of the disk ({} bytes)",
                    self.size()
                )))
            }
        }
        let mut out = Vec::new();
        let (mut at, end) = (offset, offset + len);
        while at < end {
            let within = at % b;
            let take = (b - within).min(end - at);
            out.push(((at / b) as u32, within as u32, take as u32));
            at += take;
        }
        Ok(out)
    }
}

/// The plaintext of `BSTATE`: the node list (`count u32 | count x (len u32 | "URL HEXKEY")`),
/// every node's identity (`count x [16]`), the epoch u64, then the balancer's state.
type Plain = (Vec<NodeSpec>, Vec<[u8; 16]>, u64, Balancer);

fn decode_plain(plain: &[u8]) -> Result<Plain, DiskError> {
    let mut r = Reader::new(plain);
    let e = |e: pir_core::Error| DiskError::Oram(OramError::StateFormat(e));
    let count = r.u32().map_err(e)? as usize;
    check_count(&r, "nodes", count, balance::MAX_NODES, 4).map_err(e)?;
    let mut specs = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.u32().map_err(e)? as usize;
        if len > MAX_URL + 128 {
            return Err(state_error("a node name too long".into()));
        }
        let text = std::str::from_utf8(r.take(len).map_err(e)?)
            .map_err(|_| state_error("a node that is not UTF-8".into()))?;
        let (url, key) = text
            .split_once(' ')
            .ok_or_else(|| state_error("a node without a key".into()))?;
        let key = PublicKey::from_text(key).map_err(|_| state_error("a node's key".into()))?;
        specs.push((url.to_string(), key));
    }
    let ids = (0..count)
        .map(|_| r.array::<16>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(e)?;
    let epoch = r.u64().map_err(e)?;
    let core = balance::decode(r.take(r.remaining()).map_err(e)?)?;
    if core.nodes() != specs.len() {
        return Err(state_error("the node list does not match the state".into()));
    }
    Ok((specs, ids, epoch, core))
}

impl BlockDevice for Balanced {
    fn size(&self) -> u64 {
        u64::from(self.core.blocks()) * u64::from(self.core.block_size())
    }

    fn block_size(&self) -> u32 {
        self.core.block_size()
    }

    fn submit_read(&mut self, offset: u64, len: u64) -> Result<Vec<(u64, u32, u32)>, DiskError> {
        let mut ids = Vec::new();
        for (block, within, take) in self.pieces(offset, len)? {
            ids.push((self.submit(block, Op::Read)?, within, take));
        }
        Ok(ids)
    }

    fn submit_write(&mut self, offset: u64, data: &[u8]) -> Result<Vec<u64>, DiskError> {
        let b = self.core.block_size();
        let mut ids = Vec::new();
        let mut used = 0usize;
        for (block, within, take) in self.pieces(offset, data.len() as u64)? {
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
            ids.push(self.submit(block, op)?);
        }
        Ok(ids)
    }

    fn step(&mut self) -> Result<Vec<Answer>, DiskError> {
        let Some(plan) = self.core.begin_batch(&mut self.rng)? else {
            return Ok(Vec::new());
        };
        let replies = self.nodes.batch(&plan.nodes)?;
        let answers = self.core.finish_batch(plan, &replies)?;
        if self.core.checkpoint_due() {
            self.checkpoint()?;
        }
        Ok(answers)
    }

    fn pending(&self) -> usize {
        self.core.pending_len()
    }

    fn flush(&mut self) -> Result<Vec<Answer>, DiskError> {
        let mut answers = Vec::new();
        while self.pending() > 0 {
            answers.extend(self.step()?);
        }
        self.checkpoint()?;
        Ok(answers)
    }

    fn close(mut self) -> Result<(), DiskError> {
        self.flush().map(|_| ())
    }
}
