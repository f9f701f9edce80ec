//! The load generator behind `pir loadtest`: lookups against running servers over pinned
//! HTTPS from this process, closed loop (`--clients` clients, each its own connection, lookups
//! back to back) or open loop (`--rate` lookups a second on a fixed schedule, however slowly the
//! servers answer), with abusive connections mixed in on request. The binary parses flags,
//! calls [`source`] and [`run`] (or [`knee`]), and prints the [`Report`].
//!
//! What a lookup is depends on the server ([`work`]): a mirror's Chor query, a single-server
//! `pir serve`'s lattice query, what the Safe Browsing proxy sends the two servers for one hash
//! prefix, or a whole breach check (QDP seeds and queries to both servers). Queries are made at
//! the start by the real client code and replayed (the servers cannot tell a replay from a new
//! query, and the load tool spends its CPU on the network, not on making queries), except
//! breach checks, whose single-use seeds make every check a live one. A lookup is served when
//! every reply is a signed answer envelope (not an error).
//!
//! Latency: closed loop, from send to the last reply; open loop, from the time the schedule
//! said to send (so a stalled generator or server cannot hide its queue: no coordinated
//! omission). Each lookup is counted in the interval it was sent in ([`timeline`]); the
//! servers are sampled at the end of every interval: their `/metrics` (resident memory, bytes,
//! QDP queue depth and fallback full scans) and, given their process ids, their CPU time
//! from `/proc/PID/stat`.
//!
//! With `--abuse`, alongside the clients: connections that send headers one byte a second
//! (slowloris), connections that send nothing, requests announcing 100 MB bodies, requests
//! whose body trickles, and malformed envelopes, all at the first server. The report says how
//! the server dealt with each and whether the valid clients were served meanwhile.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pir_client::{HttpsTransport, LookupScheme, Tap};
use pir_core::wire::{self, MessageKind};
use pir_core::{DbShape, MultiServerScheme, SchemeId};
use pir_keys::PublicKey;
use pir_service::framing;
use rand::Rng;

mod abuse;
pub mod chart;
mod drive;
mod report;
pub mod timeline;
pub mod work;

pub use abuse::AbuseCounts;
pub use drive::{knee, run, Knee, KneeRule, LOOKUP_TIMEOUT, MAX_IN_FLIGHT};
pub use report::Report;
pub use timeline::{IntervalRow, IntervalTally};
use work::Work;

/// Distinct queries made at the start and replayed.
pub const DISTINCT_QUERIES: usize = 32;

/// The kinds of server the load generator drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A mirror (`pir mirror serve`): Chor queries over its newest release.
    Mirror,
    /// A single-server database (`pir serve`): SimplePIR, DoublePIR or YPIR queries.
    Lattice,
    /// The two Safe Browsing servers (`pir safebrowsing serve`, server 0 first): the lookups
    /// the proxy makes for one hash prefix, by this scheme.
    SafeBrowsing(LookupScheme),
    /// The two breach servers (`pir breach serve`, server 0 first): whole QDP checks.
    Breach,
}

/// How lookups are sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// This many clients, each sending its next lookup when the last is answered.
    Closed {
        /// Concurrent clients (at least 1).
        clients: usize,
    },
    /// Lookups at this rate a second, each sent on schedule whatever is still in flight.
    Open {
        /// Lookups a second (more than 0).
        rate: f64,
    },
}

/// One run: the servers, the load, how long, and the abusive connections.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Each server's URL and the key that pins its TLS (server 0 first).
    pub servers: Vec<(String, PublicKey)>,
    /// Closed or open loop.
    pub load: Load,
    /// How long lookups are sent, in seconds (at least 1).
    pub seconds: u64,
    /// Abusive connections of each kind, or `None` for none at all.
    pub abusers: Option<usize>,
    /// How often the servers are sampled and lookups are counted, in milliseconds.
    pub interval_ms: u64,
    /// The servers' process ids, for their CPU time (`/proc/PID/stat`; same machine only).
    pub server_pids: Vec<u32>,
}

impl Plan {
    /// A closed-loop plan against one server, sampled every second.
    pub fn closed(server: (String, PublicKey), clients: usize, seconds: u64) -> Plan {
        Plan {
            servers: vec![server],
            load: Load::Closed { clients },
            seconds,
            abusers: None,
            interval_ms: 1000,
            server_pids: Vec::new(),
        }
    }

    /// The two lines printed before a run: what is targeted and how.
    pub fn intro(&self, source: &Source) -> [String; 2] {
        let urls: Vec<&str> = self.servers.iter().map(|(url, _)| url.as_str()).collect();
        let load = match self.load {
            Load::Closed { clients } => format!("{clients} clients"),
            Load::Open { rate } => format!("open loop at {rate} lookups/s"),
        };
        [
            format!("target: {} at {}", source.what, urls.join(" and ")),
            format!(
                "{load} for {} s{}",
                self.seconds,
                match self.abusers {
                    Some(n) =>
                        format!(", with {n} slowloris, {n} idle and {n} bad-body connections"),
                    None => String::new(),
                }
            ),
        ]
    }

    /// Refuses a plan that cannot run.
    pub fn check(&self) -> Result<()> {
        if self.servers.is_empty() {
            bail!("give at least one --server");
        }
        if self.seconds == 0 {
            bail!("--clients and --seconds must be at least 1");
        }
        match self.load {
            Load::Closed { clients: 0 } => bail!("--clients and --seconds must be at least 1"),
            Load::Open { rate } if !(rate > 0.0 && rate.is_finite()) => {
                bail!("--rate must be a positive number of lookups a second")
            }
            _ => {}
        }
        if self.interval_ms == 0 {
            bail!("--interval-ms must be at least 1");
        }
        Ok(())
    }
}

/// The lookups of a run and the largest reply a request may get.
#[derive(Debug, Clone)]
pub struct Source {
    work: Work,
    max_reply: usize,
    what: String,
}

impl Source {
    /// Replays of single requests to server 0.
    fn single(requests: Vec<Vec<u8>>, max_reply: usize, what: String) -> Source {
        let lookups = requests.into_iter().map(|r| vec![vec![(0, r)]]).collect();
        Source {
            work: Work::Replay(Arc::new(lookups)),
            max_reply,
            what,
        }
    }

    /// What the lookups are for, in words.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The request envelopes replayed, in order (none for live breach checks).
    pub fn requests(&self) -> Vec<Vec<u8>> {
        match &self.work {
            Work::Replay(lookups) => lookups
                .iter()
                .flatten()
                .flatten()
                .map(|(_, request)| request.clone())
                .collect(),
            Work::Breach(_) => Vec::new(),
        }
    }

    /// The recorded lookups (none for live breach checks).
    pub fn lookups(&self) -> &[work::Lookup] {
        match &self.work {
            Work::Replay(lookups) => lookups,
            Work::Breach(_) => &[],
        }
    }

    /// The largest reply a request may get.
    pub fn max_reply(&self) -> usize {
        self.max_reply
    }
}

/// The lookups for the servers of `kind` at `servers` (server 0 first), made by the real
/// client code.
pub async fn source(servers: &[(String, PublicKey)], kind: Kind) -> Result<Source> {
    let Some(first) = servers.first() else {
        bail!("give at least one --server");
    };
    match kind {
        Kind::Mirror => mirror_source(first).await,
        Kind::Lattice => lattice_source(first).await,
        Kind::SafeBrowsing(scheme) => {
            let (work, what) = work::safebrowsing_work(servers, scheme, DISTINCT_QUERIES).await?;
            Ok(Source {
                work,
                // A Checklist, SinglePass or DPF answer of one 32-byte record, and then some.
                max_reply: 1 << 20,
                what,
            })
        }
        Kind::Breach => {
            if servers.len() != 2 {
                bail!("a breach load test needs both servers: --server for server 0, then 1");
            }
            let (work, what) = work::breach_work(servers).await?;
            Ok(Source {
                work,
                max_reply: 0,
                what,
            })
        }
    }
}

/// Chor queries (the first server's share) over the release the mirror serves.
async fn mirror_source(server: &(String, PublicKey)) -> Result<Source> {
    let transport = HttpsTransport::new(std::slice::from_ref(server))?;
    let manifest =
        pir_client::fetch_manifest(&transport, 0, pir_updates::fetch::MAX_MANIFEST_BYTES)
            .await
            .context("fetching the mirror's manifest")?;
    let decoded = pir_updates::manifest::Manifest::decode_unverified(&manifest)
        .context("the mirror's manifest")?;
    let id = pir_keys::sha256(&manifest);
    chor_source(
        decoded.block_count,
        decoded.block_size as usize,
        id,
        &mut rand::rng(),
    )
}

/// [`DISTINCT_QUERIES`] Chor queries (the first server's share) for random blocks of the
/// release `id` of `block_count` blocks of `block_size` bytes.
pub fn chor_source(
    block_count: u64,
    block_size: usize,
    id: [u8; 32],
    rng: &mut impl rand::CryptoRng,
) -> Result<Source> {
    let shape = DbShape::new(block_count, block_size)?;
    let scheme = pir_xor::Chor::new(shape, 2)?;
    let mut requests = Vec::with_capacity(DISTINCT_QUERIES);
    for _ in 0..DISTINCT_QUERIES {
        let index = rng.random_range(0..block_count) as usize;
        let (queries, _) = scheme.query(&[index], rng)?;
        requests.push(pir_service::reply::request(
            SchemeId::Chor,
            &id,
            &[scheme.encode_query(&queries[0])],
        ));
    }
    Ok(Source::single(
        requests,
        framing::reply_bytes(1, scheme.max_answer_body()),
        format!(
            "mirror, release {}: {block_count} blocks of {block_size} B, Chor queries ({} B each)",
            hex::encode(&id[..8]),
            scheme.encode_query(&scheme.query(&[0], rng)?.0[0]).len()
        ),
    ))
}

/// The lattice client's own queries (SimplePIR, DoublePIR or YPIR, whatever the server runs).
async fn lattice_source(server: &(String, PublicKey)) -> Result<Source> {
    let https = HttpsTransport::new(std::slice::from_ref(server))?;
    let (recording, recorded) = Tap::recording(Arc::new(https));
    let session = pir_client::lattice::LatticeSession::open_with(recording, server.1, None)
        .await
        .context("opening a session with the server")?;
    let records = session.header().params.records;
    let mut rng = rand::rng();
    let mut max_reply = 0;
    for _ in 0..DISTINCT_QUERIES.min(8) {
        let index = rng.random_range(0..records);
        let fetched = session
            .fetch(&[index])
            .await
            .context("a lookup to record the queries")?;
        max_reply = max_reply.max(fetched.reply_bytes);
    }
    // The query envelopes the session sent (not its info and hint requests).
    let requests: Vec<Vec<u8>> = (recorded.lock().unwrap_or_else(|p| p.into_inner()).iter())
        .filter(|(_, request)| {
            wire::decode_envelope(request, request.len())
                .is_ok_and(|e| e.kind == MessageKind::Query)
        })
        .map(|(_, request)| request.clone())
        .collect();
    if requests.is_empty() {
        bail!("the session sent no query to record");
    }
    let what = format!(
        "single-server PIR ({:?}), {records} records, queries of {} B",
        session.header().params.scheme,
        requests[0].len()
    );
    Ok(Source::single(requests, max_reply.max(1) * 2 + 4096, what))
}

/// The `p` quantile (0 to 1, nearest rank) of `sorted` microseconds, in milliseconds; NaN
/// when there is none.
pub fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

pub(crate) fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("?".into(), |b| {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    })
}
