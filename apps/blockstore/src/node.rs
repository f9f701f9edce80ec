//! ORAM nodes: the server side of the node protocol (`pir oram node`: one oblivious [`Disk`]
//! over its own stores, serving node-blocks to the balancer) and the balancer's client side
//! ([`NodeClient`]); the message bodies are `pir_oram::node_protocol`.
//!
//! Trust: a node is the owner's, like the balancer (it holds its disk's key and sees which of
//! its node-blocks the balancer reads and writes, never which logical block one is). The
//! network between them sees only which node gets a message, when, and its size (HTTPS pinned
//! to the node's key; the node serves only the holder of the balancer's owner key). The
//! node's stores see what any ORAM's stores see.
//!
//! Durability: `FLUSH(epoch)` flushes the disk (stores synced, node state written), then
//! writes `STATE.epoch` atomically; a node that failed a request refuses every later one
//! until it is restarted (it then reopens at its last flush).
//!
//! Batching: a batch's reads are answered at once, its writes may wait in memory for a later
//! message ([`MAX_BATCH`] accesses per ORAM batch: a message's reads, then the oldest waiting
//! writes up to a whole number of ORAM batches), so a node with fewer reads than writes per
//! message (2 nodes: about 16 and 18 of 32) runs one full ORAM batch per message, not a full
//! one and a tiny one. A read of a slot with a waiting write answers that write's bytes;
//! `FLUSH` runs every waiting write first. What the node's stores see stays a function of
//! the messages' public counts.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pir_client::{HttpsTransport, Transport};
use pir_core::scheme::SchemeId;
use pir_core::wire::{self, ErrorCode, MessageKind};
use pir_core::Codec;
use pir_keys::PublicKey;
use pir_oram::balance::NodeOps;
use pir_oram::node_protocol::{NodeInfo, NodeRequest};
use pir_oram::{Op, OramError, Request, MAX_BATCH};
use pir_service::{Handler, Metrics, Reply};

use crate::Disk;

/// Largest message body either way (a batch names at most [`MAX_SLOTS`] blocks of at most
/// 64 KiB).
pub const MAX_BODY: usize = 16 << 20;
/// Most node-blocks one batch names (reads and writes each).
pub const MAX_SLOTS: usize = 256;

/// The epoch file beside a node's state: `STATE.epoch`.
pub fn epoch_path(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".epoch");
    PathBuf::from(name)
}

/// The node's identity file beside its state: `STATE.nodeid` (16 random bytes in hex, made
/// at the first start; copy it with the state when a node moves).
pub fn id_path(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".nodeid");
    PathBuf::from(name)
}

/// Reads the node's identity, making it on the first start.
fn node_id(state: &Path) -> std::io::Result<[u8; 16]> {
    let path = id_path(state);
    let mut id = [0u8; 16];
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            hex::decode_to_slice(text.trim(), &mut id).map_err(|_| {
                std::io::Error::other(format!("{} is not 32 hex digits", path.display()))
            })?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            rand::RngCore::fill_bytes(&mut rand::rng(), &mut id);
            pir_fs::write_atomic_bytes(&path, format!("{}\n", hex::encode(id)).as_bytes())?;
        }
        Err(e) => return Err(e),
    }
    Ok(id)
}

fn read_epoch(state: &Path) -> u64 {
    std::fs::read_to_string(epoch_path(state))
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

struct Inner {
    disk: Disk,
    id: [u8; 16],
    epoch: u64,
    next_id: u64,
    /// Writes received but not yet given to the disk (slot and block, oldest first): fewer
    /// than [`MAX_BATCH`] plus one message's writes.
    held: VecDeque<(u32, Vec<u8>)>,
    /// Why the node stopped serving (a failed disk operation), if it did.
    broken: Option<String>,
}

/// The server side of one node: its disk, served to the balancer.
pub struct NodeService {
    state: PathBuf,
    inner: Mutex<Inner>,
    metrics: Metrics,
}

fn reply(result: Result<Vec<u8>, String>) -> Reply {
    match result {
        Ok(body) => Reply {
            status: 200,
            body: wire::encode_envelope(SchemeId::OramStore, MessageKind::Answer, &body),
        },
        Err(message) => Reply {
            status: 400,
            body: wire::encode_envelope(
                SchemeId::Control,
                MessageKind::Error,
                &wire::encode_error(ErrorCode::BadRequest, &message),
            ),
        },
    }
}

impl NodeService {
    /// Serves the opened disk of `state` (reading or making its identity file).
    pub fn new(state: &Path, disk: Disk) -> std::io::Result<NodeService> {
        Ok(NodeService {
            state: state.to_path_buf(),
            inner: Mutex::new(Inner {
                id: node_id(state)?,
                disk,
                epoch: read_epoch(state),
                next_id: 0,
                held: VecDeque::new(),
                broken: None,
            }),
            metrics: Metrics::default(),
        })
    }

    /// Flushes the disk (on shutdown); refused if the node failed earlier.
    pub fn flush(&self) -> Result<(), crate::DiskError> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &inner.broken {
            return Err(crate::DiskError::Usage(why.clone()));
        }
        submit_held(&mut inner, usize::MAX)?;
        inner.disk.flush().map(|_| ())
    }

    fn handle(&self, request: &[u8]) -> Result<Vec<u8>, String> {
        let envelope = wire::decode_envelope(request, MAX_BODY).map_err(|e| e.to_string())?;
        if envelope.scheme != SchemeId::OramStore || envelope.kind != MessageKind::Query {
            return Err("not a node request".into());
        }
        let request =
            NodeRequest::from_bytes(envelope.body, &MAX_SLOTS).map_err(|e| e.to_string())?;
        // A panic while holding the lock leaves `broken` unset but the disk mid-batch: the
        // next request's disk call fails or answers; a node is restarted on any doubt.
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &inner.broken {
            return Err(format!("this node failed earlier ({why}); restart it"));
        }
        let result = match request {
            NodeRequest::Info => Ok(NodeInfo {
                block_size: inner.disk.geometry().block_size,
                blocks: inner.disk.geometry().blocks,
                epoch: inner.epoch,
                id: inner.id,
            }
            .to_bytes()),
            NodeRequest::Batch {
                reads,
                writes,
                data,
            } => {
                // Decoded, the written blocks are one piece (the encoder may send several).
                let data = match data.as_slice() {
                    [one] => std::borrow::Cow::Borrowed(*one),
                    pieces => std::borrow::Cow::Owned(pieces.concat()),
                };
                batch(&mut inner, &reads, &writes, &data)
            }
            NodeRequest::Flush(epoch) => self.flush_to(&mut inner, epoch),
        };
        if let Err(NodeFailure::Disk(why)) = &result {
            inner.broken = Some(why.clone());
        }
        result.map_err(|e| match e {
            NodeFailure::Refused(why) | NodeFailure::Disk(why) => why,
        })
    }

    fn flush_to(&self, inner: &mut Inner, epoch: u64) -> Result<Vec<u8>, NodeFailure> {
        submit_held(inner, usize::MAX).map_err(disk_failure)?;
        // The answers are those of the waiting writes just given to the disk: empty.
        let answers = inner.disk.flush().map_err(disk_failure)?;
        debug_assert!(answers.iter().all(|a| a.data.is_empty()));
        if epoch > inner.epoch {
            let path = epoch_path(&self.state);
            pir_fs::write_atomic_bytes(&path, format!("{epoch}\n").as_bytes())
                .map_err(|e| NodeFailure::Disk(format!("{}: {e}", path.display())))?;
            inner.epoch = epoch;
        }
        Ok(Vec::new())
    }
}

enum NodeFailure {
    /// A bad request: refused before the disk was touched.
    Refused(String),
    /// The disk failed: the node stops serving.
    Disk(String),
}

fn disk_failure(e: crate::DiskError) -> NodeFailure {
    NodeFailure::Disk(e.to_string())
}

/// Gives the disk up to `count` of the waiting writes, oldest first.
fn submit_held(inner: &mut Inner, count: usize) -> Result<(), crate::DiskError> {
    for _ in 0..count {
        let Some((slot, block)) = inner.held.pop_front() else {
            break;
        };
        let request = Request {
            id: inner.next_id,
            block: slot,
            op: Op::Write(block),
        };
        inner.next_id += 1;
        inner.disk.submit(request)?;
    }
    Ok(())
}

/// Reads then writes node-blocks; the reply is the read blocks, in order. The reads run now,
/// with the oldest waiting writes up to a whole number of ORAM batches (at least as many as
/// the reads need, and enough that fewer than a batch of writes is left waiting).
fn batch(
    inner: &mut Inner,
    reads: &[u32],
    writes: &[u32],
    data: &[u8],
) -> Result<Vec<u8>, NodeFailure> {
    let g = inner.disk.geometry();
    let (b, blocks) = (g.block_size as usize, g.blocks);
    if reads.iter().chain(writes).any(|&s| s >= blocks) {
        return Err(NodeFailure::Refused(format!(
            "a node-block past the end of this node ({blocks} blocks)"
        )));
    }
    if data.len() != writes.len() * b {
        return Err(NodeFailure::Refused(
            "written bytes that are not whole blocks".into(),
        ));
    }
    // A slot with a waiting write reads as that write (the newest: the balancer writes a
    // slot once between checkpoints, and a flush empties the queue, but be exact anyway).
    let waiting: Vec<Option<usize>> = reads
        .iter()
        .map(|&slot| inner.held.iter().rposition(|(s, _)| *s == slot))
        .collect();
    let mut out = vec![0u8; reads.len() * b];
    for (i, at) in waiting.iter().enumerate() {
        if let Some(at) = *at {
            out[i * b..(i + 1) * b].copy_from_slice(&inner.held[at].1);
        }
    }
    inner.held.extend(
        writes
            .iter()
            .zip(data.chunks_exact(b))
            .map(|(&s, d)| (s, d.to_vec())),
    );
    let first = inner.next_id;
    for (i, &slot) in reads.iter().enumerate() {
        let request = Request {
            id: first + i as u64,
            block: slot,
            op: Op::Read,
        };
        inner.disk.submit(request).map_err(disk_failure)?;
    }
    inner.next_id += reads.len() as u64;
    let batches = reads
        .len()
        .div_ceil(MAX_BATCH)
        .max((reads.len() + inner.held.len()) / MAX_BATCH);
    submit_held(inner, batches * MAX_BATCH - reads.len()).map_err(disk_failure)?;
    while inner.disk.pending() > 0 {
        for answer in inner.disk.step().map_err(disk_failure)? {
            let i = answer.id.wrapping_sub(first) as usize;
            if i < reads.len() && waiting[i].is_none() && answer.data.len() == b {
                out[i * b..(i + 1) * b].copy_from_slice(&answer.data);
            }
        }
    }
    Ok(out)
}

impl Handler for NodeService {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        requests
            .iter()
            .map(|request| {
                let started = std::time::Instant::now();
                let reply = reply(self.handle(request));
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
        "ok: ORAM node".into()
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

/// The balancer's connections to its nodes, each pinned to its key; requests to several nodes
/// go at once.
pub struct NodeClient {
    transport: Arc<HttpsTransport>,
    runtime: tokio::runtime::Handle,
    nodes: usize,
    /// Bytes sent and received (envelopes and bodies), for the benchmark's overhead figure.
    wire_bytes: std::sync::atomic::AtomicU64,
}

async fn exchange(
    transport: Arc<HttpsTransport>,
    node: usize,
    body: Vec<u8>,
) -> Result<Vec<u8>, OramError> {
    let failed = |e: String| OramError::Store(format!("node {node}: {e}"));
    let request = wire::encode_envelope(SchemeId::OramStore, MessageKind::Query, &body);
    let reply = transport
        .exchange(node, request, wire::HEADER_LEN + MAX_BODY)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let envelope = wire::decode_envelope(&reply, MAX_BODY).map_err(|e| failed(e.to_string()))?;
    match envelope.kind {
        MessageKind::Answer if envelope.scheme == SchemeId::OramStore => Ok(envelope.body.to_vec()),
        MessageKind::Error => {
            let (_, message) =
                wire::decode_error(envelope.body).map_err(|e| failed(e.to_string()))?;
            Err(failed(format!("refused: {message}")))
        }
        _ => Err(failed("an unexpected reply".into())),
    }
}

impl NodeClient {
    /// Connects lazily to `nodes` (URL and key each) as the holder of `client`; `runtime` runs
    /// the exchanges (call from a thread outside it).
    pub fn new(
        nodes: &[(String, PublicKey)],
        client: &pir_keys::SecretKey,
        runtime: tokio::runtime::Handle,
    ) -> Result<NodeClient, OramError> {
        let transport = HttpsTransport::with_client_key(nodes, client)
            .map_err(|e| OramError::Store(e.to_string()))?;
        Ok(NodeClient {
            transport: Arc::new(transport),
            runtime,
            nodes: nodes.len(),
            wire_bytes: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Bytes of node messages so far, both ways (envelopes included, TLS and HTTP not).
    pub fn wire_bytes(&self) -> u64 {
        self.wire_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends `bodies[i]` to node `i`, all at once; replies in order.
    fn all(&self, bodies: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, OramError> {
        let sent: usize = bodies.iter().map(|b| b.len() + wire::HEADER_LEN).sum();
        let handles: Vec<_> = bodies
            .into_iter()
            .enumerate()
            .map(|(node, body)| {
                self.runtime
                    .spawn(exchange(self.transport.clone(), node, body))
            })
            .collect();
        let out: Vec<Vec<u8>> = self.runtime.block_on(async move {
            let mut out = Vec::with_capacity(handles.len());
            for handle in handles {
                out.push(
                    handle
                        .await
                        .map_err(|e| OramError::Store(format!("node task failed: {e}")))??,
                );
            }
            Ok::<_, OramError>(out)
        })?;
        let received: usize = out.iter().map(|b| b.len() + wire::HEADER_LEN).sum();
        self.wire_bytes.fetch_add(
            (sent + received) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(out)
    }

    /// Every node's shape and epoch.
    pub fn info(&self) -> Result<Vec<NodeInfo>, OramError> {
        let body = NodeRequest::Info.to_bytes();
        self.all(vec![body; self.nodes])?
            .iter()
            .enumerate()
            .map(|(i, reply)| {
                NodeInfo::from_bytes(reply, &())
                    .map_err(|e| OramError::Store(format!("node {i}: {e}")))
            })
            .collect()
    }

    /// Runs one batch: `ops[i]` on node `i`; returns each node's read blocks.
    pub fn batch(&self, ops: &[NodeOps]) -> Result<Vec<Vec<u8>>, OramError> {
        let bodies = ops
            .iter()
            .map(|o| {
                NodeRequest::Batch {
                    reads: o.reads.clone(),
                    writes: o.writes.iter().map(|(s, _)| *s).collect(),
                    data: o.writes.iter().map(|(_, d)| d.as_slice()).collect(),
                }
                .to_bytes()
            })
            .collect();
        self.all(bodies)
    }

    /// Flushes every node, making `epoch` durable on each.
    pub fn flush(&self, epoch: u64) -> Result<(), OramError> {
        let body = NodeRequest::Flush(epoch).to_bytes();
        self.all(vec![body; self.nodes]).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ask(node: &NodeService, request: NodeRequest<'_>) -> Vec<u8> {
        let body = request.to_bytes();
        let body = wire::encode_envelope(SchemeId::OramStore, MessageKind::Query, &body);
        node.handle(&body).unwrap()
    }

    /// Writes that wait for a later message are read back from memory, flushed by `FLUSH`,
    /// and read back from the disk after it (and after a batch that runs them).
    #[test]
    fn waiting_writes_read_back_before_and_after_a_flush() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("node");
        let b = 512usize;
        let stores = [crate::StoreSpec::Dir(dir.path().join("store"))];
        Disk::init(&state, 256 * b as u64, b as u32, &stores, None).unwrap();
        let node = NodeService::new(&state, Disk::open(&state, None).unwrap()).unwrap();
        let block = |s: u32| vec![s as u8; b];
        let batch = |reads: Vec<u32>, writes: Vec<u32>, data: &[u8]| {
            ask(
                &node,
                NodeRequest::Batch {
                    reads,
                    writes,
                    data: vec![data],
                },
            )
        };
        // No reads: all 40 writes wait (more than a batch: a whole batch runs, 8 wait).
        let slots: Vec<u32> = (10..50).collect();
        let data: Vec<u8> = slots.iter().flat_map(|&s| block(s)).collect();
        assert!(batch(Vec::new(), slots.clone(), &data).is_empty());
        assert_eq!(node.inner.lock().unwrap().held.len(), 8);
        let got = batch(vec![12, 49, 3], Vec::new(), &[]);
        assert_eq!(got, [block(12), block(49), vec![0; b]].concat());
        assert!(node.inner.lock().unwrap().held.is_empty());
        let slots: Vec<u32> = (100..140).collect();
        let data: Vec<u8> = slots.iter().flat_map(|&s| block(s)).collect();
        batch(Vec::new(), slots, &data);
        assert_eq!(node.inner.lock().unwrap().held.len(), 8);
        ask(&node, NodeRequest::Flush(1));
        assert!(node.inner.lock().unwrap().held.is_empty());
        assert_eq!(batch(vec![139], Vec::new(), &[]), block(139));
        let got = batch(vec![48, 10], vec![60], &block(60));
        assert_eq!(got, [block(48), block(10)].concat());
        assert_eq!(batch(vec![60], Vec::new(), &[]), block(60));
    }
}
