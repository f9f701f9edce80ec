//! The network runtime of a mirror: HTTPS with rustls, hyper connections, axum routing.
//!
//! Routes (HTTPS listener):
//! - `POST /pir/v1`: one request envelope in the body, one reply envelope back. Bodies larger
//!   than [`Service::max_request_bytes`] are refused before they are read.
//! - `GET /health`: release id and shape; never touches the database.
//! - `GET /metrics`: Prometheus counters (no query contents, see [`crate::Metrics`]).
//!
//! Legacy listener (plain HTTP, only when configured): `GET /files/{name}` returns a file of the
//! release as-is, for clients that do not speak PIR (upPIR, seed 000, section 4.2). Those
//! downloads are not private; the CLI says so.
//!
//! Answers are computed on the blocking pool with at most `workers` scans at a time, so a flood
//! of requests queues instead of thrashing the memory bus. Nothing here logs request contents.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::Service;

/// Content type of every envelope.
pub const CONTENT_TYPE: &str = "application/x-pir";
/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to listen.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// HTTPS address (tests and the demo use 127.0.0.1 with port 0).
    pub listen: SocketAddr,
    /// Optional plain-HTTP address for legacy file downloads.
    pub legacy_listen: Option<SocketAddr>,
    /// Most answers computed at once (defaults to the number of cores).
    pub workers: usize,
}

impl ServerOptions {
    /// Options with one worker per core and no legacy listener.
    pub fn new(listen: SocketAddr) -> Self {
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Self {
            listen,
            legacy_listen: None,
            workers,
        }
    }
}

/// A started server; dropping it does not stop it, call [`RunningServer::shutdown`].
#[derive(Debug)]
pub struct RunningServer {
    /// The bound HTTPS address.
    pub addr: SocketAddr,
    /// The bound legacy address, if any.
    pub legacy_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl RunningServer {
    /// Stops accepting, and waits for the accept loops to end.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }

    /// Runs until the process receives Ctrl-C, then shuts down.
    pub async fn run_until_ctrl_c(self) {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        self.shutdown().await;
    }
}

#[derive(Clone)]
struct AppState {
    service: Arc<Service>,
    workers: Arc<Semaphore>,
}

/// Binds the listeners and starts serving `service`.
pub async fn start(
    service: Arc<Service>,
    tls: Arc<rustls::ServerConfig>,
    options: ServerOptions,
) -> std::io::Result<RunningServer> {
    let state = AppState {
        service: service.clone(),
        workers: Arc::new(Semaphore::new(options.workers.max(1))),
    };
    let limit = service.max_request_bytes();
    let app = Router::new()
        .route("/pir/v1", post(pir_request))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state.clone());

    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();

    let listener = TcpListener::bind(options.listen).await?;
    let addr = listener.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tasks.spawn(accept_loop(listener, Some(acceptor), app, stopped.clone()));
    tracing::info!(%addr, "serving PIR over HTTPS");

    let legacy_addr = match options.legacy_listen {
        Some(legacy) => {
            let listener = TcpListener::bind(legacy).await?;
            let legacy_addr = listener.local_addr()?;
            let legacy_app = Router::new()
                .route("/files/{*name}", get(legacy_file))
                .route("/manifest.pir", get(legacy_manifest))
                .route("/health", get(health))
                .with_state(state);
            tasks.spawn(accept_loop(listener, None, legacy_app, stopped));
            tracing::warn!(addr = %legacy_addr, "serving plain legacy downloads: these are NOT private");
            Some(legacy_addr)
        }
        None => None,
    };
    Ok(RunningServer {
        addr,
        legacy_addr,
        stop,
        tasks,
    })
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Router,
    mut stopped: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.changed() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _peer)) => tcp,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let tls = tls.clone();
        connections.spawn(async move {
            let builder = hyper::server::conn::http1::Builder::new();
            let result = match tls {
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            builder
                                .serve_connection(TokioIo::new(stream), service)
                                .await
                        }
                        Ok(Err(error)) => {
                            tracing::debug!(%error, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    }
                }
                None => builder.serve_connection(TokioIo::new(tcp), service).await,
            };
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
    }
    connections.abort_all();
}

async fn pir_request(State(state): State<AppState>, body: Bytes) -> Response {
    let permit = match state.workers.clone().acquire_owned().await {
        Ok(permit) => permit,
        Err(_) => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
    };
    let service = state.service.clone();
    let reply = tokio::task::spawn_blocking(move || {
        let reply = service.handle(&body);
        drop(permit);
        reply
    })
    .await;
    match reply {
        Ok(reply) => (
            StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            [(header::CONTENT_TYPE, CONTENT_TYPE)],
            reply.body,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn health(State(state): State<AppState>) -> String {
    state.service.health()
}

async fn metrics(State(state): State<AppState>) -> String {
    state.service.metrics().render()
}

async fn legacy_file(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    match state.service.legacy_file(&name) {
        Some(bytes) => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            bytes.to_vec(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such file in this release\n").into_response(),
    }
}

async fn legacy_manifest(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        state.service.manifest().to_vec(),
    )
        .into_response()
}
