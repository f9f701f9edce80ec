//! The accept loops of the runtime's listeners: connection bounds, timeouts, draining, stop
//! signals, and handing freed memory back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::limits::AcceptBackoff;

/// How long a client may take to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopSignals")
    }
}

/// SIGTERM and SIGINT, listened for from the moment the server starts: a signal that arrives
/// before `run_until_signal` waits (just after start-up) still drains the
/// server instead of killing it.
pub(crate) struct StopSignals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl StopSignals {
    pub(crate) fn listen() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let streams = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(term), Ok(int)) => Some((term, int)),
                _ => None,
            };
            Self { streams }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Waits for SIGINT or SIGTERM and names it.
    pub(crate) async fn wait(&mut self) -> &'static str {
        #[cfg(unix)]
        if let Some((term, int)) = &mut self.streams {
            return tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            };
        }
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}

/// What bounds each listener's connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub(crate) max_connections: usize,
    pub(crate) header_timeout: Duration,
    pub(crate) grace: Duration,
    /// At the cap, close the oldest idle connection for a new one instead of letting the new
    /// one wait.
    pub(crate) evict_idle: bool,
}

/// Connections of the HTTPS listener: open now, and closed since the start.
#[derive(Default)]
pub(crate) struct Connections {
    pub(crate) open: AtomicUsize,
    pub(crate) closed: AtomicUsize,
}

/// Counts an open connection for as long as it lives.
struct OpenGuard(Option<Arc<Connections>>);

impl OpenGuard {
    fn new(counts: Option<Arc<Connections>>) -> Self {
        if let Some(counts) = &counts {
            counts.open.fetch_add(1, Ordering::Relaxed);
        }
        Self(counts)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        if let Some(counts) = &self.0 {
            counts.open.fetch_sub(1, Ordering::Relaxed);
            counts.closed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Connections closed between two hand-backs of free memory.
const TRIM_AFTER_CLOSED: usize = 64;

/// Every few seconds, once [`TRIM_AFTER_CLOSED`] connections have closed, hands the heap
/// memory they freed back to the system. glibc's allocator otherwise keeps it, so a burst of
/// a thousand clients would leave the server's resident memory at its peak for good.
pub(crate) async fn janitor(counts: Arc<Connections>, mut stopped: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    let mut trimmed_at = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => return,
        }
        let closed = counts.closed.load(Ordering::Relaxed);
        if closed.wrapping_sub(trimmed_at) >= TRIM_AFTER_CLOSED {
            trimmed_at = closed;
            let _ = tokio::task::spawn_blocking(pir_kernels::memory::release_free_memory).await;
        }
    }
}

/// One open connection, as the accept loop sees it: whether a request is being answered on
/// it, and how to tell it to close.
struct Slot {
    busy: AtomicUsize,
    evicting: std::sync::atomic::AtomicBool,
    evict: tokio::sync::Notify,
}

/// The open connections of one listener, oldest first (by serial number).
#[derive(Default)]
struct Table {
    slots: std::sync::Mutex<std::collections::BTreeMap<u64, Arc<Slot>>>,
    next: std::sync::atomic::AtomicU64,
}

impl Table {
    /// Registers a connection; it leaves the table when the returned guard drops.
    fn enter(self: &Arc<Self>) -> (Arc<Slot>, Leave) {
        let serial = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            busy: AtomicUsize::new(0),
            evicting: std::sync::atomic::AtomicBool::new(false),
            evict: tokio::sync::Notify::new(),
        });
        if let Ok(mut slots) = self.slots.lock() {
            slots.insert(serial, slot.clone());
        }
        (slot, Leave(self.clone(), serial))
    }

    /// Tells the oldest connection with no request in flight to close; false if every one is
    /// busy.
    fn evict_oldest_idle(&self) -> bool {
        let Ok(slots) = self.slots.lock() else {
            return false;
        };
        for slot in slots.values() {
            if slot.busy.load(Ordering::Acquire) == 0 && !slot.evicting.swap(true, Ordering::AcqRel)
            {
                slot.evict.notify_one();
                return true;
            }
        }
        false
    }
}

/// Removes a connection from its [`Table`].
struct Leave(Arc<Table>, u64);

impl Drop for Leave {
    fn drop(&mut self) {
        if let Ok(mut slots) = self.0.slots.lock() {
            slots.remove(&self.1);
        }
    }
}

/// Resolves once the connection was told to close while no request was in flight on it.
async fn evicted(slot: &Slot) {
    loop {
        slot.evict.notified().await;
        if slot.busy.load(Ordering::Acquire) == 0 {
            return;
        }
        // A request started just before: it is answered, the next idle moment closes.
        slot.evicting.store(false, Ordering::Release);
    }
}

/// A connection's service, marking its slot busy while a request is answered.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    slot: Arc<Slot>,
}

/// Marks a slot busy for as long as it lives.
struct Busy(Arc<Slot>);

impl Busy {
    fn new(slot: Arc<Slot>) -> Self {
        slot.busy.fetch_add(1, Ordering::AcqRel);
        Self(slot)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, R, B> hyper::service::Service<R> for Tracked<S>
where
    S: hyper::service::Service<R, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, S::Error>> + Send>,
    >;

    fn call(&self, request: R) -> Self::Future {
        let busy = Busy::new(self.slot.clone());
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            // Busy until the response is written, not only until it is made.
            Ok(response.map(|inner| TrackedBody {
                inner,
                busy: Some(busy),
            }))
        })
    }
}

/// A response body that keeps its connection marked busy until it is sent.
struct TrackedBody<B> {
    inner: B,
    busy: Option<Busy>,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        let polled = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None | Some(Err(_)))) {
            this.busy = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Accepts connections until `stopped` changes, then drains: no new connections, each open
/// one closes after its request in flight, and whatever is still open after the grace period
/// is closed.
///
/// At most `bounds.max_connections` are open at once. When they are, either the next client
/// waits in the kernel's backlog until one closes, or (`bounds.evict_idle`) it is accepted and
/// the oldest connection with no request in flight is closed for it, so that idle connections
/// cannot lock out a client with a request to send. A lack of file descriptors pauses
/// accepting ([`AcceptBackoff`]) and is logged once per episode.
pub(crate) async fn accept_loop<S, B>(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    service: S,
    mut stopped: watch::Receiver<bool>,
    bounds: Bounds,
    counts: Option<Arc<Connections>>,
) where
    S: hyper::service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(bounds.max_connections));
    let table = Arc::new(Table::default());
    let mut backoff = AcceptBackoff::default();
    loop {
        // Without eviction a slot is taken before accepting: the next client waits in the
        // backlog. With it, the client is accepted first and a slot made for it.
        let early = if bounds.evict_idle {
            None
        } else {
            tokio::select! {
                permit = slots.clone().acquire_owned() => match permit {
                    Ok(permit) => Some(permit),
                    Err(_) => break,
                },
                _ = stopped.changed() => break,
            }
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.changed() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _peer)) => {
                if let Some(failures) = backoff.succeeded() {
                    tracing::info!(failures, "accepting connections again");
                }
                tcp
            }
            Err(error) => {
                let (pause, log) = backoff.failed(&error);
                if log {
                    tracing::warn!(
                        %error,
                        limit = ?crate::limits::open_file_limit(),
                        "cannot accept connections (out of file descriptors?): pausing until \
                         some close; raise the open-file limit (ulimit -n, LimitNOFILE=) or \
                         lower max_connections"
                    );
                } else if pause.is_zero() {
                    tracing::debug!(%error, "accept failed");
                }
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = stopped.changed() => break,
                }
                continue;
            }
        };
        let permit = match early {
            Some(permit) => permit,
            None => match slots.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    table.evict_oldest_idle();
                    tokio::select! {
                        permit = slots.clone().acquire_owned() => match permit {
                            Ok(permit) => permit,
                            Err(_) => break,
                        },
                        _ = stopped.changed() => break,
                    }
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let (slot, leave) = table.enter();
        let service = Tracked {
            inner: service.clone(),
            slot: slot.clone(),
        };
        let tls = tls.clone();
        let watcher = graceful.watcher();
        let guard = OpenGuard::new(counts.clone());
        connections.spawn(async move {
            let (_permit, _guard, _leave) = (permit, guard, leave);
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(bounds.header_timeout);
            let result = match tls {
                Some(acceptor) => {
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
                    let stream = tokio::select! {
                        done = handshake => match done {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(error)) => {
                                tracing::debug!(%error, "TLS handshake failed");
                                return;
                            }
                            Err(_) => return,
                        },
                        _ = evicted(&slot) => return,
                    };
                    let connection =
                        watcher.watch(builder.serve_connection(TokioIo::new(stream), service));
                    tokio::select! {
                        result = connection => result,
                        _ = evicted(&slot) => return,
                    }
                }
                None => {
                    let connection =
                        watcher.watch(builder.serve_connection(TokioIo::new(tcp), service));
                    tokio::select! {
                        result = connection => result,
                        _ = evicted(&slot) => return,
                    }
                }
            };
            if let Err(error) = result {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    if tokio::time::timeout(bounds.grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            open = connections.len(),
            "grace period over: closing the connections still open"
        );
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}
