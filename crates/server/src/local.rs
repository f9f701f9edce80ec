//! The bounded plain-HTTP listener of the user's own proxies (`pir safebrowsing proxy`,
//! `pir breach proxy`): loopback only, for the browser and the password manager on the same
//! machine.
//!
//! The application answers requests (a handler from `http::Request<Bytes>` to
//! `http::Response<Bytes>`, with no HTTP server of its own); this listener decides which
//! requests reach it and bounds what any local process, or a web page, can make it hold:
//!
//! - it binds only loopback addresses ([`start`] refuses others: the proxies see hash prefixes
//!   in the clear);
//! - a request's `Host` must be a loopback name, `localhost`, `127.0.0.1` or `[::1]`, with or
//!   without a port (also in an absolute request target); anything else gets 421 before the
//!   handler sees it. A web page that rebinds its own name to 127.0.0.1 (DNS rebinding) sends
//!   its own name, so it can neither read answers nor drive lookups;
//! - at most [`LocalOptions::max_connections`] connections, fitted under the open-file limit
//!   with a reserve (the proxies need descriptors for their own connections to the servers);
//!   at the cap, a new connection closes the oldest one with no request in flight, so idle
//!   connections cannot lock the browser out;
//! - header, idle and body timeouts; one request in flight per connection (HTTP/1.1);
//! - bodies of at most [`LocalOptions::max_body_bytes`], and all bodies held at once within
//!   [`LocalOptions::memory_budget`] ([`crate::budget`]).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::Full;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::budget::MemoryBudget;
use crate::listener::{accept_loop, Bounds, StopSignals};
use crate::runtime::Running;

/// Default [`LocalOptions::max_connections`]: a browser opens a handful per host; room for
/// several browsers and tools.
pub const DEFAULT_LOCAL_MAX_CONNECTIONS: usize = 256;
/// Default [`LocalOptions::header_timeout`] (also how long a keep-alive connection may idle):
/// a local client sends its headers at once.
pub const DEFAULT_LOCAL_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`LocalOptions::body_timeout`].
pub const DEFAULT_LOCAL_BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`LocalOptions::max_body_bytes`]: a Safe Browsing v4 request is a few hundred bytes.
pub const DEFAULT_LOCAL_MAX_BODY: usize = 64 * 1024;
/// Default [`LocalOptions::memory_budget`].
pub const DEFAULT_LOCAL_MEMORY_BUDGET: usize = 16 << 20;
/// Default [`LocalOptions::grace`].
pub const DEFAULT_LOCAL_GRACE: Duration = Duration::from_secs(5);

/// Where and how the local listener listens.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// A loopback address (port 0: any free port).
    pub listen: SocketAddr,
    /// Most connections open at once (lowered to what the open-file limit allows).
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, and may keep a connection idle.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers are in.
    pub body_timeout: Duration,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Most bytes of request bodies held at once, over all connections (raised to
    /// `max_body_bytes` if lower).
    pub memory_budget: usize,
    /// How long a shutdown waits for requests in flight.
    pub grace: Duration,
}

impl LocalOptions {
    /// The defaults, listening on `listen`.
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            max_connections: DEFAULT_LOCAL_MAX_CONNECTIONS,
            header_timeout: DEFAULT_LOCAL_HEADER_TIMEOUT,
            body_timeout: DEFAULT_LOCAL_BODY_TIMEOUT,
            max_body_bytes: DEFAULT_LOCAL_MAX_BODY,
            memory_budget: DEFAULT_LOCAL_MEMORY_BUDGET,
            grace: DEFAULT_LOCAL_GRACE,
        }
    }
}

/// A started local listener; dropping it does not stop it, call [`RunningLocal::shutdown`].
/// Its limits are [`Running`]'s.
#[derive(Debug)]
pub struct RunningLocal {
    /// The bound address.
    pub addr: SocketAddr,
    running: Running,
}

impl std::ops::Deref for RunningLocal {
    type Target = Running;

    fn deref(&self) -> &Running {
        &self.running
    }
}

impl RunningLocal {
    /// Stops accepting, lets requests in flight finish within the grace period, closes the
    /// rest; returns when every connection is closed.
    pub async fn shutdown(self) {
        self.running.shutdown().await;
    }

    /// Runs until SIGINT (Ctrl-C) or SIGTERM, then shuts down ([`RunningLocal::shutdown`]).
    pub async fn run_until_signal(mut self) {
        let signal = self.running.signal().await;
        tracing::info!(signal, "stopping the local listener");
        self.shutdown().await;
    }
}

/// Whether `authority` (a `Host` header or the authority of a request target) names this
/// machine by a loopback name: `localhost`, `127.0.0.1` or `[::1]`, with or without a port.
pub fn is_loopback_authority(authority: &str) -> bool {
    let (host, port) = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((inner, port)) => (&authority[..inner.len() + 2], port),
            None => return false,
        },
        None => match authority.split_once(':') {
            Some((host, _)) => (host, &authority[host.len()..]),
            None => (authority, ""),
        },
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|p| {
            !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
        });
    port_ok && (host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1" || host == "[::1]")
}

/// A plain-text answer from the listener itself.
fn refusal(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}

/// Why a request is refused before its body is read, if it is.
fn refused_target<B>(request: &Request<B>) -> Option<Response<Full<Bytes>>> {
    let host = request.headers().get_all(header::HOST);
    let mut hosts = host.iter();
    let Some(host) = hosts.next() else {
        return Some(refusal(
            StatusCode::BAD_REQUEST,
            "a request names its Host (localhost, 127.0.0.1 or [::1])",
        ));
    };
    let in_target = request.uri().authority().map(|a| a.as_str());
    let loopback = hosts.next().is_none()
        && host.to_str().is_ok_and(is_loopback_authority)
        && in_target.is_none_or(is_loopback_authority);
    (!loopback).then(|| {
        refusal(
            StatusCode::MISDIRECTED_REQUEST,
            "this proxy answers only requests for localhost, 127.0.0.1 or [::1]",
        )
    })
}

/// [`start`] with the default options at `listen` (a loopback address), each request answered
/// by `answer` on a clone of `shared`: a proxy whose one state (its sessions, its cache)
/// answers every request.
pub async fn start_shared<S, F, Fut>(
    listen: SocketAddr,
    shared: Arc<S>,
    answer: F,
) -> std::io::Result<RunningLocal>
where
    S: Send + Sync + 'static + ?Sized,
    F: Fn(Arc<S>, Request<Bytes>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Bytes>> + Send + 'static,
{
    let handler = move |request| answer(shared.clone(), request);
    start(LocalOptions::new(listen), handler).await
}

/// Binds `options.listen` (a loopback address) and serves `handler` there.
pub async fn start<F, Fut>(options: LocalOptions, handler: F) -> std::io::Result<RunningLocal>
where
    F: Fn(Request<Bytes>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Bytes>> + Send + 'static,
{
    if !options.listen.ip().is_loopback() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is not a loopback address: a local proxy listens on 127.0.0.1 or [::1]",
                options.listen
            ),
        ));
    }
    let signals = StopSignals::listen();
    let wanted = options.max_connections.max(1);
    let cap = crate::limits::fit_caps(&[wanted], crate::limits::open_file_room())[0];
    if cap < wanted {
        tracing::warn!(
            max_connections = wanted,
            serving = cap,
            open_file_limit = ?crate::limits::open_file_limit(),
            "the open-file limit allows at most {cap} connections to the local listener"
        );
    }
    let budget = MemoryBudget::new(options.memory_budget.max(options.max_body_bytes));
    let listener = TcpListener::bind(options.listen).await?;
    let addr = listener.local_addr()?;
    let request_budget = budget.clone();
    let (limit, body_timeout) = (options.max_body_bytes, options.body_timeout);
    let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
        let (handler, budget) = (handler.clone(), request_budget.clone());
        async move {
            if let Some(refused) = refused_target(&request) {
                return Ok::<_, std::convert::Infallible>(refused);
            }
            let (parts, body) = request.into_parts();
            let announced = parts
                .headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            let (body, held) = match budget.read(body, announced, limit, body_timeout).await {
                Ok(read) => read,
                Err(error) => {
                    let (status, text) = error.status_and_text();
                    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
                    return Ok(refusal(status, text.trim_end()));
                }
            };
            let response = handler(Request::from_parts(parts, body)).await;
            drop(held);
            Ok(response.map(Full::new))
        }
    });
    let bounds = Bounds {
        max_connections: cap,
        header_timeout: options.header_timeout,
        grace: options.grace,
        evict_idle: true,
    };
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tasks.spawn(accept_loop(listener, None, service, stopped, bounds, None));
    Ok(RunningLocal {
        addr,
        running: Running::new(stop, tasks, signals, cap, budget),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_pass() {
        for good in [
            "localhost",
            "LocalHost:8470",
            "127.0.0.1",
            "127.0.0.1:80",
            "[::1]",
            "[::1]:8470",
        ] {
            assert!(is_loopback_authority(good), "{good}");
        }
        for bad in [
            "evil.example",
            "evil.example:8470",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "127.0.0.2",
            "[::2]",
            "[::1",
            "localhost:",
            "localhost:80:80",
            "127.0.0.1:99999x",
            "user@localhost",
            "",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }
}
