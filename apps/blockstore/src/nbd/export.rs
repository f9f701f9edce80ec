//! The NBD export: serves a [`Disk`](crate::Disk), or any [`BlockDevice`], to NBD clients
//! over a socket.
//!
//! One worker thread owns the device (the ORAM is a sequential state machine); connections
//! are tokio tasks that negotiate with [`crate::nbd`] (TLS with a pre-shared key first when
//! the export has one), send jobs to the worker and write replies as they come back (NBD
//! allows any order). The worker takes every job queued so far (up to a flush), runs them as
//! ORAM batches of up to 32 requests, and answers each job only after all of its block reads
//! completed. Level rebuilds run in the background: a wave at a time between batches, and
//! while no job is queued the worker keeps shuffling a wave at a time, looking for new jobs
//! between waves, so an idle export catches up and a busy one is never stopped for a whole
//! rebuild.
//!
//! Bounds, so that a client cannot make the export work for nobody: each connection has at
//! most [`ExportOptions::max_requests`] requests and [`ExportOptions::max_bytes`] bytes in
//! flight (a request holds its credit until its reply is written to the socket, so unread
//! replies stop the reader too); jobs of a connection that closed are dropped before they run;
//! handshakes and idle connections time out; connections are capped below the open-file
//! limit. When the store fails, the export stops and says so: it does not go on completing
//! handshakes for requests it can only refuse.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use openssl::ssl::{Ssl, SslContext};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio_openssl::SslStream;

use super::listen::Listener;
use super::{command, errno, Negotiation, Next, Replies, RequestHeader, MAX_PAYLOAD};
use crate::device::BlockDevice;
use crate::DiskError;

/// Limits and security of an export.
#[derive(Clone)]
pub struct ExportOptions {
    /// Most connections at once (further ones are closed at once); lowered to fit the
    /// open-file limit.
    pub max_connections: usize,
    /// Most requests in flight per connection.
    pub max_requests: usize,
    /// Most bytes of requests (read lengths, write payloads) in flight per connection.
    pub max_bytes: usize,
    /// Time allowed from accepting a connection to the transmission phase (TLS included).
    pub handshake_timeout: Duration,
    /// A connection with nothing in flight that sends nothing for this long is closed
    /// (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// On shutdown, time allowed for queued requests and the final flush.
    pub grace: Duration,
    /// When set, clients must complete TLS with a pre-shared key before anything else.
    pub tls: Option<SslContext>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            max_connections: 64,
            max_requests: 64,
            max_bytes: 64 << 20,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Some(Duration::from_secs(600)),
            grace: Duration::from_secs(10),
            tls: None,
        }
    }
}

/// Counters of an export, for tests and operators (counts only, never offsets or data).
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Jobs the worker ran.
    pub jobs_run: AtomicU64,
    /// Jobs dropped unrun because their connection had closed.
    pub jobs_dropped: AtomicU64,
    /// Connections closed at once because the cap was reached.
    pub connections_refused: AtomicU64,
}

/// Why the export stopped without closing the store cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The final flush or close failed.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// The store failed while serving; the export stopped.
    #[error("the store failed while serving ({0}); stopped serving")]
    Failed(String),
    /// Queued requests and the final flush did not finish within the grace period.
    #[error("queued requests did not finish within the grace period of {0:?}")]
    Grace(Duration),
    /// The ORAM worker thread panicked.
    #[error("the ORAM worker panicked")]
    Panicked,
}

/// A reply to a job: bytes read (possibly none), or an NBD error number and message.
type JobResult = std::result::Result<Vec<u8>, (u32, String)>;

/// A connection's credit for one request, returned when its reply is on the socket.
struct Credit {
    _count: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

/// One reply for a connection's writer.
struct Outgoing {
    cookie: u64,
    /// `Some(offset)` for a read's data.
    read_at: Option<u64>,
    result: JobResult,
    credit: Option<Credit>,
}

type Outbox = tokio::sync::mpsc::UnboundedSender<Outgoing>;

mod worker;
use worker::*;

/// What every connection shares.
struct Shared {
    size: u64,
    block_size: u32,
    options: ExportOptions,
    jobs: mpsc::Sender<Msg>,
}

/// Serves `disk` on `listener` until `shutdown` completes or the store fails; then stops
/// reading requests, finishes those queued (within [`ExportOptions::grace`]), flushes and
/// closes the store. `Ok` means the store was flushed and closed cleanly.
pub async fn serve<D: BlockDevice>(
    disk: D,
    listener: Listener,
    options: ExportOptions,
    stats: Arc<ExportStats>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ExportError> {
    let (size, block_size) = (disk.size(), disk.block_size());
    let (jobs, inbox) = mpsc::channel::<Msg>();
    let (failed_tx, mut failed) = watch::channel::<Option<String>>(None);
    let worker_stats = stats.clone();
    let worker = std::thread::spawn(move || worker(disk, inbox, worker_stats, failed_tx));
    let (closing_tx, closing) = watch::channel(false);
    let slots = Arc::new(Semaphore::new(super::listen::connection_cap(
        options.max_connections,
    )));
    let grace = options.grace;
    let shared = Arc::new(Shared {
        size,
        block_size,
        options,
        jobs: jobs.clone(),
    });
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = accept(&listener) => match accepted {
                Ok(stream) => {
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        stats.connections_refused.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let (shared, closing) = (shared.clone(), closing.clone());
                    tokio::spawn(async move {
                        let result = match stream {
                            Accepted::Tcp(s) => connection(s, shared, closing).await,
                            Accepted::Unix(s) => connection(s, shared, closing).await,
                        };
                        if let Err(e) = result {
                            tracing::debug!("NBD connection closed: {e}");
                        }
                        drop(slot);
                    });
                }
                // Out of file descriptors, or a connection reset before accept: wait a little
                // instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            _ = &mut shutdown => break,
            _ = failed.changed() => break,
        }
    }
    // No new handshakes (a Unix socket disappears), no new requests; queued ones finish.
    drop(listener);
    let _ = closing_tx.send(true);
    let _ = jobs.send(Msg::Stop);
    drop((jobs, shared));
    // A plain thread waits for the worker: a runtime waits for its blocking tasks when it
    // shuts down, and past the grace period nothing should wait for this one.
    let (done, joined) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = done.send(worker.join());
    });
    match tokio::time::timeout(grace, joined).await {
        Err(_) => Err(ExportError::Grace(grace)),
        Ok(Ok(Ok(result))) => result,
        Ok(_) => Err(ExportError::Panicked),
    }
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(listener: &Listener) -> std::io::Result<Accepted> {
    match listener {
        Listener::Tcp(l) => {
            let (stream, _) = l.accept().await?;
            stream.set_nodelay(true)?;
            Ok(Accepted::Tcp(stream))
        }
        Listener::Unix(l, _) => Ok(Accepted::Unix(l.accept().await?.0)),
    }
}

/// How a negotiation ended.
enum Outcome {
    Transmit,
    Close,
    StartTls,
}

async fn negotiate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    negotiation: &mut Negotiation,
) -> std::io::Result<Outcome> {
    loop {
        let mut header = [0u8; 16];
        stream.read_exact(&mut header).await?;
        let (option, len) = Negotiation::header(header).map_err(invalid)?;
        let mut data = vec![0u8; len as usize];
        stream.read_exact(&mut data).await?;
        let (bytes, outcome) = match negotiation.option(option, &data) {
            Next::Reply(bytes) => (bytes, None),
            Next::Transmit(bytes) => (bytes, Some(Outcome::Transmit)),
            Next::Close(bytes) => (bytes, Some(Outcome::Close)),
            Next::StartTls(bytes) => (bytes, Some(Outcome::StartTls)),
        };
        stream.write_all(&bytes).await?;
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
    }
}

/// A connection after its handshake: plain, or inside TLS.
enum Negotiated<S> {
    Closed,
    Plain(S, Replies),
    Tls(Box<SslStream<S>>, Replies),
}

async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    shared: &Shared,
) -> std::io::Result<Negotiated<S>> {
    stream.write_all(&super::greeting()).await?;
    let mut flags = [0u8; 4];
    stream.read_exact(&mut flags).await?;
    let mut negotiation =
        Negotiation::new(flags, shared.size, shared.block_size).map_err(invalid)?;
    let Some(context) = &shared.options.tls else {
        return Ok(match negotiate(&mut stream, &mut negotiation).await? {
            Outcome::Transmit => Negotiated::Plain(
                stream,
                Replies {
                    structured: negotiation.structured,
                },
            ),
            Outcome::Close | Outcome::StartTls => Negotiated::Closed,
        });
    };
    negotiation.require_tls();
    match negotiate(&mut stream, &mut negotiation).await? {
        Outcome::StartTls => {}
        Outcome::Transmit | Outcome::Close => return Ok(Negotiated::Closed),
    }
    let ssl = Ssl::new(context).map_err(std::io::Error::other)?;
    let mut tls = Box::new(SslStream::new(ssl, stream).map_err(std::io::Error::other)?);
    Pin::new(&mut *tls)
        .accept()
        .await
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string()))?;
    tracing::debug!("NBD client completed {}", tls.ssl().version_str());
    negotiation.tls_started();
    Ok(match negotiate(&mut *tls, &mut negotiation).await? {
        Outcome::Transmit => Negotiated::Tls(
            tls,
            Replies {
                structured: negotiation.structured,
            },
        ),
        Outcome::Close | Outcome::StartTls => Negotiated::Closed,
    })
}

async fn connection<S>(
    stream: S,
    shared: Arc<Shared>,
    closing: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let timeout = shared.options.handshake_timeout;
    let negotiated = tokio::time::timeout(timeout, handshake(stream, &shared))
        .await
        .map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "the handshake timed out")
        })??;
    match negotiated {
        Negotiated::Closed => Ok(()),
        Negotiated::Plain(s, replies) => transmit(s, replies, shared, closing).await,
        Negotiated::Tls(s, replies) => transmit(s, replies, shared, closing).await,
    }
}

/// Why the transmission loop ended.
enum End {
    /// `NBD_CMD_DISC`, or the export is stopping: answer what is in flight, then close.
    Drain,
    /// The client is gone or broke the protocol: drop its queued work.
    Abandon(std::io::Error),
}

async fn transmit<S>(
    stream: S,
    replies: Replies,
    shared: Arc<Shared>,
    mut closing: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (out, mut outbox) = tokio::sync::mpsc::unbounded_channel::<Outgoing>();
    let mut writer_task = tokio::spawn(async move {
        while let Some(reply) = outbox.recv().await {
            let bytes = match (reply.result, reply.read_at) {
                (Ok(data), Some(offset)) => replies.data(reply.cookie, offset, &data),
                (Ok(_), None) => replies.done(reply.cookie),
                (Err((code, message)), _) => replies.error(reply.cookie, code, &message),
            };
            if writer.write_all(&bytes).await.is_err() {
                return;
            }
            // The credit goes back only now: unread replies hold the client's budget.
            drop(reply.credit);
        }
        let _ = writer.shutdown().await;
    });
    let options = &shared.options;
    let count = Arc::new(Semaphore::new(options.max_requests.max(1)));
    let bytes = Arc::new(Semaphore::new(options.max_bytes.max(1)));
    let mut writer_gone = false;
    let end = loop {
        let idle = count.available_permits() == options.max_requests.max(1);
        let limit = options.idle_timeout.filter(|_| idle);
        let header = tokio::select! {
            header = read_header(&mut reader, limit) => header,
            _ = &mut writer_task => { writer_gone = true; break End::Abandon(hung_up()) }
            _ = closing.changed() => break End::Drain,
        };
        let request = match header {
            Ok(Some(request)) => request,
            Ok(None) => break End::Drain,
            Err(e) => break End::Abandon(e),
        };
        let cost = match request.command {
            command::READ | command::WRITE => request.length as usize,
            command::WRITE_ZEROES => (request.length as usize).min(1 << 20),
            _ => 0,
        }
        .min(options.max_bytes.max(1));
        let credit = tokio::select! {
            credit = take_credit(&count, &bytes, cost) => credit,
            _ = &mut writer_task => { writer_gone = true; break End::Abandon(hung_up()) }
            _ = closing.changed() => break End::Drain,
        };
        let Some(credit) = credit else {
            break End::Abandon(std::io::Error::other("credit closed"));
        };
        if request.payload() > MAX_PAYLOAD {
            // The connection cannot be resynchronised after an oversized write.
            break End::Abandon(invalid(format!(
                "a write of {} bytes (the limit is {MAX_PAYLOAD})",
                request.payload()
            )));
        }
        let mut payload = vec![0u8; request.payload() as usize];
        let read = match options.idle_timeout {
            Some(t) => tokio::time::timeout(t, reader.read_exact(&mut payload))
                .await
                .unwrap_or_else(|_| Err(timed_out())),
            None => reader.read_exact(&mut payload).await,
        };
        if let Err(e) = read {
            break End::Abandon(e);
        }
        if request.command == command::DISC {
            break End::Drain;
        }
        let work = match work_of(&request, payload) {
            Ok(work) => work,
            Err((code, message)) => {
                let _ = out.send(Outgoing {
                    cookie: request.cookie,
                    read_at: None,
                    result: Err((code, message.to_string())),
                    credit: Some(credit),
                });
                continue;
            }
        };
        let Some(work) = work else {
            // A hint (trim, cache): doing nothing is allowed and reveals nothing.
            let _ = out.send(Outgoing {
                cookie: request.cookie,
                read_at: None,
                result: Ok(Vec::new()),
                credit: Some(credit),
            });
            continue;
        };
        let job = Job {
            work,
            cookie: request.cookie,
            to: out.clone(),
            credit,
        };
        if let Err(mpsc::SendError(Msg::Job(job))) = shared.jobs.send(Msg::Job(job)) {
            job.answer(Err((errno::ESHUTDOWN, "the store is closing".into())));
        }
    };
    drop(out);
    match end {
        End::Drain => {
            if !writer_gone {
                let _ = writer_task.await;
            }
            Ok(())
        }
        End::Abandon(e) => {
            // Dropping the writer's receiver marks every queued job of this connection dead.
            writer_task.abort();
            Err(e)
        }
    }
}

/// The work of a request: `Ok(None)` for a hint, `Err` for a refusal to send back.
fn work_of(request: &RequestHeader, payload: Vec<u8>) -> Result<Option<Work>, (u32, &'static str)> {
    let fua = request.flags & command::FLAG_FUA != 0;
    Ok(Some(match request.command {
        command::READ if request.length <= MAX_PAYLOAD => Work::Read {
            offset: request.offset,
            length: request.length,
        },
        command::READ => return Err((errno::EOVERFLOW, "request too large")),
        command::WRITE => Work::Write {
            offset: request.offset,
            data: payload,
            fua,
        },
        command::WRITE_ZEROES => Work::Zero {
            offset: request.offset,
            length: u64::from(request.length),
            fua,
        },
        command::FLUSH => Work::Flush,
        command::TRIM | command::CACHE => return Ok(None),
        _ => return Err((errno::EINVAL, "unsupported command")),
    }))
}

/// Reads the next request header; `Ok(None)` when the connection stayed idle too long.
async fn read_header<R: AsyncRead + Unpin>(
    reader: &mut R,
    idle: Option<Duration>,
) -> std::io::Result<Option<RequestHeader>> {
    let mut header = [0u8; 28];
    let read = match idle {
        Some(limit) => match tokio::time::timeout(limit, reader.read_exact(&mut header)).await {
            Ok(read) => read,
            Err(_) => return Ok(None),
        },
        None => reader.read_exact(&mut header).await,
    };
    read?;
    RequestHeader::parse(header).map(Some).map_err(invalid)
}

async fn take_credit(
    count: &Arc<Semaphore>,
    bytes: &Arc<Semaphore>,
    cost: usize,
) -> Option<Credit> {
    let count = count.clone().acquire_owned().await.ok()?;
    let cost = u32::try_from(cost).ok()?;
    let bytes = bytes.clone().acquire_many_owned(cost).await.ok()?;
    Some(Credit {
        _count: count,
        _bytes: bytes,
    })
}

fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

fn hung_up() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the client stopped reading replies",
    )
}

fn timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "a request payload timed out")
}
