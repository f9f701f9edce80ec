//! The network runtime of a PIR server: HTTPS with rustls, hyper connections, axum routing.
//!
//! It serves any [`Handler`] (every `pir_service::SignedService`: mirrors, single-server PIR,
//! breach servers) and only moves bytes: decoding, checking, answering and signing are the
//! handler's.
//!
//! Routes (HTTPS listener):
//! - `POST /pir/v1`: one request envelope in the body, one reply envelope back. Bodies larger
//!   than [`Handler::max_request_bytes`] are refused before they are read.
//! - `GET /pir/v1/hint`: the offline download of a hint-based scheme ([`Handler::hint`]);
//!   404 for handlers without one (the mirrors).
//! - `GET /health`: release id and shape; never touches the database; 503 when the handler
//!   is not ready (a front end missing a shard). `GET /health/live`: 200 while serving.
//! - `GET /metrics`: Prometheus counters (no query contents, see [`pir_service::Metrics`]).
//!
//! Admin listener (plain HTTP, only when configured, meant for loopback): `GET /health` and
//! `GET /metrics`, for scrapers that do not pin TLS keys.
//!
//! Legacy listener (plain HTTP, only when configured): `GET /files/{name}` returns a file of the
//! release as-is, for clients that do not speak PIR (upPIR, Cappos 2013, section 4.2). Those
//! downloads are not private; the CLI says so.
//!
//! Answers are computed by one batcher thread, the first of a rayon pool of `workers` threads:
//! requests that arrive within `batch_window` of the first one waiting (up to `max_batch`
//! requests) are answered together in one pass over the database
//! ([`Handler::handle_many`]), so concurrent clients share the memory bandwidth instead of
//! competing for it. Each reply is exactly what its request gets alone; what a client can
//! observe of the others is only the batch's size, through the time the pass takes. A full
//! queue answers 503. Nothing here logs request contents.
//!
//! Abuse bounds ([`ServerOptions`]):
//! - at most `max_connections` connections are open on the HTTPS listener (more wait in the
//!   kernel's backlog), clamped at start to what the open-file limit allows
//!   ([`crate::limits`]: the soft `RLIMIT_NOFILE` minus the descriptors open minus a reserve;
//!   said once in the log); the admin listener takes at most [`ADMIN_MAX_CONNECTIONS`]. Out of
//!   descriptors anyway, the accept loop pauses instead of spinning;
//! - one request in flight per connection: HTTP/1.1 answers a connection's requests in order,
//!   and the runtime reads the next only after the previous one is answered;
//! - a client has [`HANDSHAKE_TIMEOUT`] for the TLS handshake, `header_timeout` for each
//!   request's headers (an idle keep-alive connection is closed after the same time) and
//!   `body_timeout` for its body, counted from the end of its headers (an `Expect:
//!   100-continue` request that never sends its body is cut off then too);
//! - a body announced larger than the handler's limit gets 413 before any of it is read;
//! - request bodies held in memory, on all connections together, stay within
//!   `memory_budget` ([`crate::budget`]): a body waits for room before it is read, and gets 503
//!   if none frees up before its body timeout. A body keeps its room until its request is
//!   answered or dropped;
//! - a request whose client hung up before its turn is dropped by the batcher unanswered.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use hyper_util::service::TowerToHyperService;

use crate::budget::{BudgetUse, MemoryBudget, Reservation};
use crate::listener::{accept_loop, janitor, Bounds, Connections, StopSignals};

use pir_service::Handler;

/// Content type of every envelope.
pub const CONTENT_TYPE: &str = "application/x-pir";
pub use crate::listener::HANDSHAKE_TIMEOUT;

/// Where and how to listen.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// HTTPS address (tests and the demo use 127.0.0.1 with port 0).
    pub listen: SocketAddr,
    /// Optional plain-HTTP address for legacy file downloads.
    pub legacy_listen: Option<SocketAddr>,
    /// Optional plain-HTTP address for `/metrics` and `/health` only (for a Prometheus
    /// scraper on the same host; keep it on loopback).
    pub admin_listen: Option<SocketAddr>,
    /// Threads that scan the database (defaults to the number of cores).
    pub workers: usize,
    /// How long the batcher waits for more requests after the first one (0: only what is
    /// already queued).
    pub batch_window: Duration,
    /// Most requests answered in one pass.
    pub max_batch: usize,
    /// How long a shutdown waits for requests in flight to finish before it closes their
    /// connections anyway.
    pub grace: Duration,
    /// Most connections open at once on each listener.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (and how long a keep-alive
    /// connection may sit idle).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers are in.
    pub body_timeout: Duration,
    /// A lower limit on request bodies than the handler's own (`None`: the handler's).
    pub max_request_bytes: Option<usize>,
    /// Most bytes of request bodies held in memory at once, over all connections (see
    /// [`DEFAULT_MEMORY_BUDGET`]). Raised to the largest request body if lower, so that one
    /// request of any allowed size always fits.
    pub memory_budget: usize,
}

/// Default [`ServerOptions::batch_window`]: short next to a network round trip, long enough
/// to gather the queries of concurrent clients.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(2);
/// Default [`ServerOptions::max_batch`].
pub const DEFAULT_MAX_BATCH: usize = 64;
/// Default [`ServerOptions::grace`]: long enough for a full scan of a large database, short
/// next to the 30 s a service manager usually waits after SIGTERM before it kills.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// Default [`ServerOptions::max_connections`]: far above what the batcher answers at once,
/// far below what exhausts file descriptors or memory (a TLS connection holds tens of KiB).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// Default [`ServerOptions::header_timeout`] (hyper's own default).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`ServerOptions::body_timeout`]: a 100 MB body at 30 Mbit/s.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`ServerOptions::memory_budget`]: 256 MiB, a few of the largest bodies any server
/// takes (an ORAM store's 96 MiB batches) or tens of thousands of PIR queries; far below the
/// memory of the machines the servers run on.
pub const DEFAULT_MEMORY_BUDGET: usize = 256 << 20;
/// Most connections open at once on the admin listener (a scraper or two).
pub const ADMIN_MAX_CONNECTIONS: usize = 16;
/// Requests waiting for the batcher beyond which new ones get 503.
const QUEUE_LIMIT: usize = 1024;

impl ServerOptions {
    /// Options with one worker per core and no legacy listener.
    pub fn new(listen: SocketAddr) -> Self {
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Self {
            listen,
            legacy_listen: None,
            admin_listen: None,
            workers,
            batch_window: DEFAULT_BATCH_WINDOW,
            max_batch: DEFAULT_MAX_BATCH,
            grace: DEFAULT_GRACE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_request_bytes: None,
            memory_budget: DEFAULT_MEMORY_BUDGET,
        }
    }
}

/// What every started listener holds (a [`RunningServer`], a
/// [`crate::local::RunningLocal`]): the switch that stops its accept loops, their tasks, the
/// signals it stops on, its connection cap and its request-body budget.
#[derive(Debug)]
pub struct Running {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    signals: StopSignals,
    max_connections: usize,
    budget: MemoryBudget,
}

impl Running {
    pub(crate) fn new(
        stop: watch::Sender<bool>,
        tasks: JoinSet<()>,
        signals: StopSignals,
        max_connections: usize,
        budget: MemoryBudget,
    ) -> Running {
        Running {
            stop,
            tasks,
            signals,
            max_connections,
            budget,
        }
    }

    /// The connection cap in force (a server's HTTPS listener's): `max_connections`, or
    /// less where the open-file limit allows less.
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// The memory budget for request bodies: its size, what is held now, the most held.
    pub fn memory(&self) -> BudgetUse {
        self.budget.usage()
    }

    /// Stops accepting new connections, lets requests in flight finish (each connection
    /// closes after its current request), and after the grace period closes what is left.
    /// Returns when every connection is closed.
    pub(crate) async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }

    /// Waits for SIGINT (Ctrl-C) or SIGTERM; returns its name.
    pub(crate) async fn signal(&mut self) -> &'static str {
        self.signals.wait().await
    }
}

/// A started server; dropping it does not stop it, call [`RunningServer::shutdown`]. Its
/// limits are [`Running`]'s.
#[derive(Debug)]
pub struct RunningServer {
    /// The bound HTTPS address.
    pub addr: SocketAddr,
    /// The bound legacy address, if any.
    pub legacy_addr: Option<SocketAddr>,
    /// The bound admin address, if any.
    pub admin_addr: Option<SocketAddr>,
    running: Running,
}

impl std::ops::Deref for RunningServer {
    type Target = Running;

    fn deref(&self) -> &Running {
        &self.running
    }
}

impl RunningServer {
    /// Stops gracefully ([`Running`]: requests in flight finish within the grace period);
    /// returns when every connection is closed.
    pub async fn shutdown(self) {
        self.running.shutdown().await;
    }

    /// Runs until the process receives SIGINT (Ctrl-C) or SIGTERM (what systemd and
    /// Kubernetes send), then shuts down gracefully ([`RunningServer::shutdown`]).
    pub async fn run_until_signal(mut self) {
        let signal = self.running.signal().await;
        tracing::info!(signal, "draining requests in flight, then stopping");
        self.shutdown().await;
        tracing::info!("stopped");
    }
}

struct AppState<H: ?Sized> {
    service: Arc<H>,
    jobs: std::sync::mpsc::SyncSender<Job>,
    /// Requests queued for the batcher and not yet taken (the `/metrics` queue depth).
    waiting: Arc<AtomicUsize>,
    /// Largest request body.
    limit: usize,
    body_timeout: Duration,
    /// Connections of the HTTPS listener (the `/metrics` gauge).
    connections: Arc<Connections>,
    /// Room for request bodies, shared by all connections.
    budget: MemoryBudget,
    /// Requests dropped unanswered because their client had gone.
    abandoned: Arc<AtomicU64>,
}

// Derived `Clone` would demand `H: Clone`; only the `Arc` is cloned.
impl<H: ?Sized> Clone for AppState<H> {
    fn clone(&self) -> Self {
        Self {
            service: self.service.clone(),
            jobs: self.jobs.clone(),
            waiting: self.waiting.clone(),
            limit: self.limit,
            body_timeout: self.body_timeout,
            connections: self.connections.clone(),
            budget: self.budget.clone(),
            abandoned: self.abandoned.clone(),
        }
    }
}

/// One request waiting for the batcher.
struct Job {
    body: Bytes,
    reply: oneshot::Sender<pir_service::Reply>,
    /// The body's room in the memory budget, given back when the job is dropped.
    _held: Reservation,
}

/// The batcher: takes the first waiting request, gathers more for up to `window` (at most
/// `max_batch`), answers them all in one pass on its own rayon pool, and starts over. Jobs
/// whose client has hung up meanwhile are dropped unanswered (and counted). Ends when every
/// sender is gone.
fn batcher<H: Handler + ?Sized>(
    service: Arc<H>,
    jobs: std::sync::mpsc::Receiver<Job>,
    waiting: Arc<AtomicUsize>,
    abandoned: Arc<AtomicU64>,
    pool: rayon::ThreadPool,
    window: Duration,
    max_batch: usize,
) {
    use std::sync::mpsc::RecvTimeoutError;
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        let deadline = std::time::Instant::now() + window;
        while batch.len() < max_batch {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let next = if left.is_zero() {
                jobs.try_recv().map_err(|_| RecvTimeoutError::Timeout)
            } else {
                jobs.recv_timeout(left)
            };
            match next {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        waiting.fetch_sub(batch.len(), Ordering::Relaxed);
        let before = batch.len();
        batch.retain(|job| !job.reply.is_closed());
        abandoned.fetch_add((before - batch.len()) as u64, Ordering::Relaxed);
        if batch.is_empty() {
            continue;
        }
        let bodies: Vec<&[u8]> = batch.iter().map(|job| job.body.as_ref()).collect();
        let replies = pool.install(|| service.handle_many(&bodies));
        service.metrics().record_batch(batch.len());
        for (job, reply) in batch.into_iter().zip(replies) {
            // The client may have gone; its reply is simply dropped.
            let _ = job.reply.send(reply);
        }
    }
}

/// Binds the listeners and starts serving `service`.
pub async fn start<H: Handler + ?Sized>(
    service: Arc<H>,
    tls: Arc<rustls::ServerConfig>,
    options: ServerOptions,
) -> std::io::Result<RunningServer> {
    // First, so that a stop signal during start-up is already drained, not fatal.
    let signals = StopSignals::listen();
    let (jobs, queue) = std::sync::mpsc::sync_channel(QUEUE_LIMIT);
    let batch_service = service.clone();
    let waiting = Arc::new(AtomicUsize::new(0));
    let batch_waiting = waiting.clone();
    let abandoned = Arc::new(AtomicU64::new(0));
    let batch_abandoned = abandoned.clone();
    let (window, max_batch) = (options.batch_window, options.max_batch.max(1));
    let workers = options.workers.max(1);
    let (built, pool_built) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("pir-batcher".into())
        .spawn(move || {
            // The batcher is the pool's first thread (`use_current_thread`): a pass runs on
            // it directly, not on a worker it wakes and then waits for, and with one worker
            // (the ORAM servers) no other thread is involved at all.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(workers)
                .use_current_thread()
                .thread_name(|i| format!("pir-scan-{i}"))
                .build();
            let pool = match pool {
                Ok(pool) => {
                    let _ = built.send(Ok(()));
                    pool
                }
                Err(e) => {
                    let _ = built.send(Err(std::io::Error::other(e)));
                    return;
                }
            };
            batcher(
                batch_service,
                queue,
                batch_waiting,
                batch_abandoned,
                pool,
                window,
                max_batch,
            )
        })?;
    // A blocking wait, but a short one, once per start: the thread builds its pool and says.
    pool_built
        .recv()
        .map_err(|_| std::io::Error::other("the batcher thread stopped at its start"))??;
    let limit = options
        .max_request_bytes
        .map_or(service.max_request_bytes(), |cap| {
            cap.min(service.max_request_bytes())
        });
    let budget = MemoryBudget::new(options.memory_budget.max(limit));
    let state = AppState {
        service: service.clone(),
        jobs,
        waiting,
        limit,
        body_timeout: options.body_timeout,
        connections: Arc::new(Connections::default()),
        budget: budget.clone(),
        abandoned,
    };
    let app = Router::new()
        .route("/pir/v1", post(pir_request::<H>))
        .route("/pir/v1/hint", get(hint::<H>))
        .route("/pir/v1/hint/{id}", get(hint_of::<H>))
        .route("/health", get(health::<H>))
        .route("/health/live", get(live))
        .route("/metrics", get(metrics::<H>))
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            timed::<H>,
        ))
        .with_state(state.clone());
    let caps = connection_caps(&options);
    let bounds = Bounds {
        max_connections: caps.https,
        header_timeout: options.header_timeout,
        grace: options.grace,
        evict_idle: false,
    };

    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();

    let listener = TcpListener::bind(options.listen).await?;
    let addr = listener.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tasks.spawn(accept_loop(
        listener,
        Some(acceptor),
        TowerToHyperService::new(app),
        stopped.clone(),
        bounds,
        Some(state.connections.clone()),
    ));
    tasks.spawn(janitor(state.connections.clone(), stopped.clone()));
    tracing::info!(%addr, "serving PIR over HTTPS");

    let admin_addr = match options.admin_listen {
        Some(admin) => {
            let listener = TcpListener::bind(admin).await?;
            let admin_addr = listener.local_addr()?;
            let admin_app = Router::new()
                .route("/health", get(health::<H>))
                .route("/health/live", get(live))
                .route("/metrics", get(metrics::<H>))
                .layer(axum::middleware::from_fn_with_state(
                    state.clone(),
                    timed::<H>,
                ))
                .with_state(state.clone());
            let admin_bounds = Bounds {
                max_connections: caps.admin,
                ..bounds
            };
            tasks.spawn(accept_loop(
                listener,
                None,
                TowerToHyperService::new(admin_app),
                stopped.clone(),
                admin_bounds,
                None,
            ));
            if !admin_addr.ip().is_loopback() {
                tracing::warn!(addr = %admin_addr, "admin listener (health, metrics) is reachable beyond this host");
            }
            Some(admin_addr)
        }
        None => None,
    };
    let legacy_addr = match options.legacy_listen {
        Some(legacy) => {
            let listener = TcpListener::bind(legacy).await?;
            let legacy_addr = listener.local_addr()?;
            let legacy_app = Router::new()
                .route("/files/{*name}", get(legacy_file::<H>))
                .route("/manifest.pir", get(legacy_manifest::<H>))
                .route("/health", get(health::<H>))
                .with_state(state);
            let legacy_bounds = Bounds {
                max_connections: caps.legacy,
                ..bounds
            };
            tasks.spawn(accept_loop(
                listener,
                None,
                TowerToHyperService::new(legacy_app),
                stopped,
                legacy_bounds,
                None,
            ));
            tracing::warn!(addr = %legacy_addr, "serving plain legacy downloads: these are NOT private");
            Some(legacy_addr)
        }
        None => None,
    };
    Ok(RunningServer {
        addr,
        legacy_addr,
        admin_addr,
        running: Running::new(stop, tasks, signals, caps.https, budget),
    })
}

/// The connection caps of the three listeners.
struct Caps {
    https: usize,
    admin: usize,
    legacy: usize,
}

/// `options.max_connections` for the HTTPS and legacy listeners and at most
/// [`ADMIN_MAX_CONNECTIONS`] for the admin one, all fitted under the open-file limit; says so
/// once if that lowered them.
fn connection_caps(options: &ServerOptions) -> Caps {
    let wanted = options.max_connections.max(1);
    let mut asks = vec![wanted];
    if options.admin_listen.is_some() {
        asks.push(wanted.min(ADMIN_MAX_CONNECTIONS));
    }
    if options.legacy_listen.is_some() {
        asks.push(wanted);
    }
    let caps = crate::limits::fit_caps(&asks, crate::limits::open_file_room());
    if caps[0] < wanted {
        tracing::warn!(
            max_connections = wanted,
            serving = caps[0],
            open_file_limit = ?crate::limits::open_file_limit(),
            reserve = crate::limits::FD_RESERVE,
            "max_connections is more than the open-file limit allows: serving at most {} \
             connections at once; raise the limit (ulimit -n, LimitNOFILE=) to serve more",
            caps[0]
        );
    }
    let mut rest = caps[1..].iter().copied();
    Caps {
        https: caps[0],
        admin: if options.admin_listen.is_some() {
            rest.next().unwrap_or(1)
        } else {
            0
        },
        legacy: rest.next().unwrap_or(1),
    }
}

async fn pir_request<H: Handler + ?Sized>(
    State(state): State<AppState<H>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Body,
) -> Response {
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let (body, held) = match state
        .budget
        .read(body, announced, state.limit, state.body_timeout)
        .await
    {
        Ok(read) => read,
        Err(error) => {
            let (status, text) = error.status_and_text();
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            return (status, text).into_response();
        }
    };
    let (reply, answer) = oneshot::channel();
    // Counted before the send so the batcher's decrement never comes first.
    state.waiting.fetch_add(1, Ordering::Relaxed);
    let job = Job {
        body,
        reply,
        _held: held,
    };
    if state.jobs.try_send(job).is_err() {
        state.waiting.fetch_sub(1, Ordering::Relaxed);
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    match answer.await {
        Ok(reply) => (
            StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [(header::CONTENT_TYPE, CONTENT_TYPE)],
            reply.body,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Measures every request of the HTTPS and admin listeners, per endpoint, into the service's
/// metrics.
async fn timed<H: Handler + ?Sized>(
    State(state): State<AppState<H>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let endpoint = pir_service::Endpoint::of(request.uri().path());
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    state
        .service
        .metrics()
        .record_http(endpoint, started.elapsed().as_secs_f64());
    response
}

/// `GET /health`: 200 when the service takes traffic, 503 when not (a front end with a shard
/// that has no live replica), so that a readiness probe can use it.
async fn health<H: Handler + ?Sized>(State(state): State<AppState<H>>) -> Response {
    let status = if state.service.ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, state.service.health()).into_response()
}

/// `GET /health/live`: 200 while the process serves requests at all (a liveness probe; a
/// front end whose shards are down stays alive: restarting it would not bring them back).
async fn live() -> &'static str {
    "ok live\n"
}

async fn metrics<H: Handler + ?Sized>(State(state): State<AppState<H>>) -> String {
    let mut text = state.service.render_metrics();
    text.push_str(&format!(
        "# HELP pir_batcher_waiting_requests Requests queued for the next pass.\n\
         # TYPE pir_batcher_waiting_requests gauge\npir_batcher_waiting_requests {}\n\
         # HELP pir_open_connections Connections open on the HTTPS listener.\n\
         # TYPE pir_open_connections gauge\npir_open_connections {}\n\
         # HELP pir_request_bytes_held Bytes of request bodies held in memory now.\n\
         # TYPE pir_request_bytes_held gauge\npir_request_bytes_held {}\n\
         # HELP pir_request_bytes_budget Most bytes of request bodies held at once.\n\
         # TYPE pir_request_bytes_budget gauge\npir_request_bytes_budget {}\n\
         # HELP pir_abandoned_requests_total Requests dropped because their client had gone.\n\
         # TYPE pir_abandoned_requests_total counter\npir_abandoned_requests_total {}\n",
        state.waiting.load(Ordering::Relaxed),
        state.connections.open.load(Ordering::Relaxed),
        state.budget.usage().in_use,
        state.budget.bytes(),
        state.abandoned.load(Ordering::Relaxed),
    ));
    if let Some(rss) = resident_bytes() {
        text.push_str(&format!(
            "# HELP process_resident_memory_bytes Resident memory of the server process.\n\
             # TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {rss}\n"
        ));
    }
    text
}

/// The process's resident memory, from `/proc/self/status` (Linux; `None` elsewhere).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

async fn hint<H: Handler + ?Sized>(State(state): State<AppState<H>>) -> Response {
    hint_reply(&state, state.service.hint())
}

/// `GET /pir/v1/hint/ID`: the hint of database ID (64 hex digits) of a server of several.
async fn hint_of<H: Handler + ?Sized>(
    State(state): State<AppState<H>>,
    Path(id): Path<String>,
) -> Response {
    let parsed = (id.len() == 64)
        .then(|| {
            let mut out = [0u8; 32];
            for (k, byte) in out.iter_mut().enumerate() {
                *byte = u8::from_str_radix(id.get(2 * k..2 * k + 2)?, 16).ok()?;
            }
            Some(out)
        })
        .flatten();
    match parsed {
        Some(id) => hint_reply(&state, state.service.hint_of(&id)),
        None => (StatusCode::BAD_REQUEST, "a database id is 64 hex digits\n").into_response(),
    }
}

fn hint_reply<H: Handler + ?Sized>(state: &AppState<H>, hint: Option<Bytes>) -> Response {
    match hint {
        Some(bytes) => {
            state.service.metrics().record_download(bytes.len());
            ([(header::CONTENT_TYPE, CONTENT_TYPE)], bytes).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            "this server has no hint to download\n",
        )
            .into_response(),
    }
}

async fn legacy_file<H: Handler + ?Sized>(
    State(state): State<AppState<H>>,
    Path(name): Path<String>,
) -> Response {
    match state.service.legacy_file(&name) {
        Some(bytes) => {
            ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such file in this release\n").into_response(),
    }
}

async fn legacy_manifest<H: Handler + ?Sized>(State(state): State<AppState<H>>) -> Response {
    match state.service.legacy_manifest() {
        Some(bytes) => {
            ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no manifest here\n").into_response(),
    }
}
