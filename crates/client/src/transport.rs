//! Getting request envelopes to mirrors and replies back.
//!
//! Waiting on a mirror is bounded in three steps ([`Timeouts`]): connecting (TCP, then TLS),
//! the reply starting (its status line, after the server computed the answer), and the whole
//! exchange. A mirror that completes TLS and never answers costs [`Timeouts::reply_start`]
//! (default 5 s, `PIR_REPLY_TIMEOUT` to change it) before the caller asks a spare.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::PublicKey;

/// Environment variable that sets [`Timeouts::reply_start`], in seconds (`2.5` allowed).
pub const REPLY_TIMEOUT_ENV: &str = "PIR_REPLY_TIMEOUT";

/// How long the client waits on a server, step by step. A server that misses a deadline
/// fails this exchange with [`TransportError::TimedOut`]; a retrieval then asks a spare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP connect, then the TLS handshake, each (default 5 s).
    pub connect: Duration,
    /// From sending the request to the reply's status line (default 5 s): the server's
    /// batching and scan must fit, which takes well under a second for a database of a few
    /// GB; a server that accepted TLS and never answers costs this much.
    pub reply_start: Duration,
    /// The whole exchange, the reply's body included (default 120 s: a large hint download).
    pub total: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(5),
            reply_start: Duration::from_secs(5),
            total: Duration::from_secs(120),
        }
    }
}

impl Timeouts {
    /// Waits for a server there is no spare for (one lattice server, the Checklist pair):
    /// giving up early gains nothing, so the reply may start as late as [`Timeouts::total`].
    pub fn without_spare() -> Self {
        let default = Self::default();
        Self {
            reply_start: default.total,
            ..default
        }
    }

    /// `self` with [`Timeouts::reply_start`] taken from [`REPLY_TIMEOUT_ENV`] when it is set.
    pub fn with_env(self) -> Result<Self, TransportError> {
        match std::env::var(REPLY_TIMEOUT_ENV) {
            Ok(value) => Ok(Self {
                reply_start: parse_seconds(&value)?,
                ..self
            }),
            Err(std::env::VarError::NotPresent) => Ok(self),
            Err(std::env::VarError::NotUnicode(_)) => Err(TransportError::Config(format!(
                "{REPLY_TIMEOUT_ENV} is not text"
            ))),
        }
    }
}

/// `"5"` or `"2.5"` seconds, positive and at most a day.
fn parse_seconds(value: &str) -> Result<Duration, TransportError> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && *s <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            TransportError::Config(format!(
                "{REPLY_TIMEOUT_ENV}={value:?}: expected a number of seconds, e.g. 5 or 2.5"
            ))
        })
}

/// Why a request did not produce a reply envelope.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The mirror URL is not usable.
    #[error("bad mirror URL {0}")]
    Url(String),
    /// TCP connection failed or timed out.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// TLS failed; includes "not the pinned server key".
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// HTTP failed, timed out, or the reply was too large or not an envelope.
    #[error("HTTP exchange failed: {0}")]
    Http(String),
    /// The server answered with an error envelope (its message).
    #[error("server refused: {0}")]
    Refused(String),
    /// The server missed a deadline of [`Timeouts`]: `waiting_for` says which.
    #[error("no {waiting_for} within {after:?}")]
    TimedOut {
        /// What did not come ("reply start", "complete reply", "TCP connection", ...).
        waiting_for: &'static str,
        /// The deadline that ended the wait.
        after: Duration,
    },
    /// The transport's settings are unusable (a bad [`REPLY_TIMEOUT_ENV`], ...).
    #[error("{0}")]
    Config(String),
}

/// Sends one request envelope to server `mirror` (an index into the transport's server list)
/// and returns its reply envelope, whatever its HTTP status.
pub trait Transport: Send + Sync + 'static {
    /// One request, one reply of at most `max_reply` bytes.
    fn exchange(
        &self,
        mirror: usize,
        request: Vec<u8>,
        max_reply: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransportError>> + Send;

    /// The server's offline download (`GET /pir/v1/hint`: a lattice hint, a breach server's
    /// info), at most `max_reply` bytes. Transports without one refuse.
    fn hint(
        &self,
        mirror: usize,
        max_reply: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransportError>> + Send {
        let _ = (mirror, max_reply);
        async {
            Err(TransportError::Http(
                "this transport has no hint download".into(),
            ))
        }
    }

    /// The hint of database `id` of a server of several (`GET /pir/v1/hint/ID-HEX`).
    fn hint_of(
        &self,
        mirror: usize,
        id: &[u8; 32],
        max_reply: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransportError>> + Send {
        let _ = (mirror, id, max_reply);
        async {
            Err(TransportError::Http(
                "this transport has no hint download".into(),
            ))
        }
    }
}

struct Endpoint {
    authority: String,
    tls: tokio_rustls::TlsConnector,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

/// HTTPS to each mirror, pinned to its Ed25519 key, with keep-alive connection reuse and
/// the deadlines of [`Timeouts`].
pub struct HttpsTransport {
    endpoints: Vec<Endpoint>,
    timeouts: Timeouts,
}

impl std::fmt::Debug for HttpsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .endpoints
            .iter()
            .map(|e| e.authority.as_str())
            .collect();
        f.debug_struct("HttpsTransport")
            .field("mirrors", &names)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

/// A mirror as the signed mirror list describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorInfo {
    /// `https://host:port`.
    pub url: String,
    /// The key its TLS and its answers must be signed with.
    pub key: PublicKey,
}

/// An HTTPS transport to servers there is no spare for ([`Timeouts::without_spare`]).
pub(crate) fn single_server_transport(
    servers: &[(String, PublicKey)],
) -> Result<HttpsTransport, TransportError> {
    HttpsTransport::with_timeouts(servers, Timeouts::without_spare().with_env()?)
}

/// `https://host:port[/]` to `host:port`.
pub fn authority_of(url: &str) -> Result<String, TransportError> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| TransportError::Url(format!("{url}: must start with https://")))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains('/') || !rest.contains(':') {
        return Err(TransportError::Url(format!(
            "{url}: expected https://HOST:PORT"
        )));
    }
    Ok(rest.to_string())
}

impl HttpsTransport {
    /// A transport for `mirrors`, each an `https://host:port` URL and the key it must hold,
    /// with the default [`Timeouts`] (its reply deadline from [`REPLY_TIMEOUT_ENV`] if set).
    pub fn new(mirrors: &[(String, PublicKey)]) -> Result<Self, TransportError> {
        Self::with_timeouts(mirrors, Timeouts::default().with_env()?)
    }

    /// [`HttpsTransport::new`] with the deadlines `timeouts`.
    pub fn with_timeouts(
        mirrors: &[(String, PublicKey)],
        timeouts: Timeouts,
    ) -> Result<Self, TransportError> {
        Self::build(mirrors, timeouts, pir_keys::tls::client_config)
    }

    /// A transport for `mirrors` that also proves it holds `client` (servers that accept only
    /// their owner, such as `pir oram store`), with the default [`Timeouts`].
    pub fn with_client_key(
        mirrors: &[(String, PublicKey)],
        client: &pir_keys::SecretKey,
    ) -> Result<Self, TransportError> {
        Self::build(mirrors, Timeouts::default().with_env()?, |key| {
            pir_keys::tls::client_config_with_key(key, client)
        })
    }

    fn build(
        mirrors: &[(String, PublicKey)],
        timeouts: Timeouts,
        config_for: impl Fn(
            PublicKey,
        )
            -> Result<Arc<tokio_rustls::rustls::ClientConfig>, pir_keys::KeyError>,
    ) -> Result<Self, TransportError> {
        let endpoints = mirrors
            .iter()
            .map(|(url, key)| {
                let config = config_for(*key).map_err(|e| TransportError::Tls(e.to_string()))?;
                Ok(Endpoint {
                    authority: authority_of(url)?,
                    tls: tokio_rustls::TlsConnector::from(config),
                    idle: Mutex::new(Vec::new()),
                })
            })
            .collect::<Result<_, TransportError>>()?;
        Ok(Self {
            endpoints,
            timeouts,
        })
    }

    /// The deadlines this transport keeps.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    async fn connect(
        endpoint: &Endpoint,
        connect: Duration,
    ) -> Result<SendRequest<Full<Bytes>>, TransportError> {
        let timed_out = |waiting_for| TransportError::TimedOut {
            waiting_for,
            after: connect,
        };
        let tcp =
            tokio::time::timeout(connect, tokio::net::TcpStream::connect(&endpoint.authority))
                .await
                .map_err(|_| timed_out("TCP connection"))?
                .map_err(|e| TransportError::Connect(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let tls = tokio::time::timeout(
            connect,
            endpoint.tls.connect(pir_keys::tls::server_name(), tcp),
        )
        .await
        .map_err(|_| timed_out("TLS handshake"))?
        .map_err(|e| TransportError::Tls(e.to_string()))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| TransportError::Http(e.to_string()))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    fn take_idle(endpoint: &Endpoint) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = endpoint
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        while let Some(sender) = idle.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    async fn exchange_on(
        &self,
        endpoint: &Endpoint,
        request: Option<Vec<u8>>,
        path: &str,
        max_reply: usize,
        pir_reply: bool,
    ) -> Result<Vec<u8>, TransportError> {
        let mut sender = match Self::take_idle(endpoint) {
            Some(sender) => sender,
            None => Self::connect(endpoint, self.timeouts.connect).await?,
        };
        sender
            .ready()
            .await
            .map_err(|e| TransportError::Http(e.to_string()))?;
        let method_was_get = request.is_none();
        let method = match request {
            Some(_) => http::Method::POST,
            None => http::Method::GET,
        };
        let http_request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, &endpoint.authority)
            .header(http::header::CONTENT_TYPE, "application/x-pir")
            .body(Full::new(Bytes::from(request.unwrap_or_default())))
            .map_err(|e| TransportError::Http(e.to_string()))?;
        // The status line comes once the server has its answer; a server that accepted the
        // request and never answers is given up on here, not after the whole-exchange bound.
        let reply_start = self.timeouts.reply_start;
        let response = tokio::time::timeout(reply_start, sender.send_request(http_request))
            .await
            .map_err(|_| TransportError::TimedOut {
                waiting_for: "reply start",
                after: reply_start,
            })?
            .map_err(|e| TransportError::Http(e.to_string()))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), max_reply)
            .collect()
            .await
            .map_err(|e| {
                TransportError::Http(format!("reading reply (limit {max_reply} bytes): {e}"))
            })?
            .to_bytes();
        // A download that succeeded is the server's document in its own format (a mirror
        // list starts with `PIRL`); a refused one must still be an error envelope.
        let downloaded = method_was_get && status.is_success();
        if pir_reply && !downloaded && !body.starts_with(&wire::MAGIC) {
            return Err(TransportError::Http(format!(
                "HTTP {status} without a pir reply"
            )));
        }
        if !pir_reply && !status.is_success() {
            return Err(TransportError::Http(format!("{path}: HTTP {status}")));
        }
        endpoint
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(sender);
        Ok(body.to_vec())
    }

    /// `GET path` on server `mirror` (a hint download): the reply envelope, at most
    /// `max_reply` bytes, whatever its HTTP status.
    pub async fn download(
        &self,
        mirror: usize,
        path: &str,
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        self.timed(mirror, None, path, max_reply, true).await
    }

    /// `GET path` on server `mirror` for a plain reply (`/metrics`, `/health`): its body, at
    /// most `max_reply` bytes, if the status is a success.
    pub async fn get_plain(
        &self,
        mirror: usize,
        path: &str,
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        self.timed(mirror, None, path, max_reply, false).await
    }

    /// One exchange with server `mirror`, bounded by the [`Timeouts`].
    async fn timed(
        &self,
        mirror: usize,
        request: Option<Vec<u8>>,
        path: &str,
        max_reply: usize,
        pir_reply: bool,
    ) -> Result<Vec<u8>, TransportError> {
        let endpoint = self
            .endpoints
            .get(mirror)
            .ok_or_else(|| TransportError::Url(format!("no mirror number {mirror}")))?;
        let total = self.timeouts.total;
        tokio::time::timeout(
            total,
            self.exchange_on(endpoint, request, path, max_reply, pir_reply),
        )
        .await
        .map_err(|_| TransportError::TimedOut {
            waiting_for: "complete reply",
            after: total,
        })?
    }
}

impl Transport for HttpsTransport {
    async fn exchange(
        &self,
        mirror: usize,
        request: Vec<u8>,
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        self.timed(mirror, Some(request), "/pir/v1", max_reply, true)
            .await
    }

    async fn hint(&self, mirror: usize, max_reply: usize) -> Result<Vec<u8>, TransportError> {
        self.download(mirror, "/pir/v1/hint", max_reply).await
    }

    async fn hint_of(
        &self,
        mirror: usize,
        id: &[u8; 32],
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        let path = format!("/pir/v1/hint/{}", hex::encode(id));
        self.download(mirror, &path, max_reply).await
    }
}

/// Servers in this process, reached by calling their [`pir_service::Handler`] directly: the
/// same bytes as over HTTPS, without sockets or TLS. For tests, examples and benchmarks.
#[derive(Clone)]
pub struct LocalTransport {
    servers: Vec<std::sync::Arc<dyn pir_service::Handler>>,
}

impl std::fmt::Debug for LocalTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTransport")
            .field("servers", &self.servers.len())
            .finish()
    }
}

impl LocalTransport {
    /// A transport to `servers`, in position order.
    pub fn new(servers: Vec<std::sync::Arc<dyn pir_service::Handler>>) -> Self {
        Self { servers }
    }

    /// Mirror-list entries for in-process servers whose keys are `keys`, in position order: a
    /// local transport routes by position, so the URLs are placeholders (`https://mirror-N.test`).
    pub fn mirrors(keys: impl IntoIterator<Item = PublicKey>) -> Vec<MirrorInfo> {
        (keys.into_iter().enumerate())
            .map(|(i, key)| MirrorInfo {
                url: format!("https://mirror-{i}.test"),
                key,
            })
            .collect()
    }

    fn server(&self, mirror: usize) -> Result<&dyn pir_service::Handler, TransportError> {
        self.servers
            .get(mirror)
            .map(|s| s.as_ref())
            .ok_or_else(|| TransportError::Url(format!("no server number {mirror}")))
    }

    fn bounded(bytes: Vec<u8>, max_reply: usize) -> Result<Vec<u8>, TransportError> {
        if bytes.len() > max_reply {
            return Err(TransportError::Http(format!(
                "reply of {} bytes over the limit of {max_reply}",
                bytes.len()
            )));
        }
        Ok(bytes)
    }
}

/// What a [`Tap`] calls with each reply: the server's number, the request envelope, the
/// largest reply allowed, and the reply (which it may change).
pub type OnReply = dyn Fn(usize, &[u8], usize, &mut Vec<u8>) + Send + Sync;

/// The requests a [`Tap::recording`] saw answered: the server's number and the request
/// envelope, in the order the replies came.
pub type Recorded = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

/// A transport that passes every exchange and download to `inner` and shows each reply, with
/// its request, to `on_reply` before the session sees it: for a demo that shows what each
/// server was sent, a load generator that records the real client's queries, or a test that
/// plays a broken server. Exchanges that fail are passed on unseen.
pub struct Tap<T> {
    inner: Arc<T>,
    on_reply: Box<OnReply>,
}

impl<T> Tap<T> {
    /// `inner`, with `on_reply` called on each reply.
    pub fn new(
        inner: Arc<T>,
        on_reply: impl Fn(usize, &[u8], usize, &mut Vec<u8>) + Send + Sync + 'static,
    ) -> Self {
        Tap {
            inner,
            on_reply: Box::new(on_reply),
        }
    }

    /// `inner`, keeping a copy of every request that got a reply, as its server saw it.
    pub fn recording(inner: Arc<T>) -> (Self, Recorded) {
        let recorded = Recorded::default();
        let log = recorded.clone();
        let tap = Tap::new(inner, move |mirror, request, _, _| {
            log.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push((mirror, request.to_vec()));
        });
        (tap, recorded)
    }
}

impl<T: Transport> Transport for Tap<T> {
    async fn exchange(
        &self,
        mirror: usize,
        request: Vec<u8>,
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        let mut reply = self
            .inner
            .exchange(mirror, request.clone(), max_reply)
            .await?;
        (self.on_reply)(mirror, &request, max_reply, &mut reply);
        Ok(reply)
    }

    async fn hint(&self, mirror: usize, max_reply: usize) -> Result<Vec<u8>, TransportError> {
        self.inner.hint(mirror, max_reply).await
    }

    async fn hint_of(
        &self,
        mirror: usize,
        id: &[u8; 32],
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        self.inner.hint_of(mirror, id, max_reply).await
    }
}

impl Transport for LocalTransport {
    async fn exchange(
        &self,
        mirror: usize,
        request: Vec<u8>,
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        let server = self.server(mirror)?;
        if request.len() > server.max_request_bytes() {
            return Err(TransportError::Http(
                "request over the server's limit".into(),
            ));
        }
        let mut replies = server.handle_many(&[&request]);
        let reply = replies
            .pop()
            .ok_or_else(|| TransportError::Http("the server gave no reply".into()))?;
        Self::bounded(reply.body, max_reply)
    }

    async fn hint(&self, mirror: usize, max_reply: usize) -> Result<Vec<u8>, TransportError> {
        let hint = self
            .server(mirror)?
            .hint()
            .ok_or_else(|| TransportError::Http("this server has no hint to download".into()))?;
        Self::bounded(hint.to_vec(), max_reply)
    }

    async fn hint_of(
        &self,
        mirror: usize,
        id: &[u8; 32],
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        let hint = self.server(mirror)?.hint_of(id).ok_or_else(|| {
            TransportError::Http("this server has no such database to download".into())
        })?;
        Self::bounded(hint.to_vec(), max_reply)
    }
}

/// Asks mirror `mirror` for the signed manifest (at most `max_bytes`); the caller verifies it.
pub async fn fetch_manifest<T: Transport>(
    transport: &T,
    mirror: usize,
    max_bytes: usize,
) -> Result<Vec<u8>, TransportError> {
    fetch_manifest_of(transport, mirror, None, max_bytes).await
}

/// Asks mirror `mirror` for the signed manifest of release `id` (`None`: the newest it serves).
/// The caller checks the signature, and that the bytes hash to `id`.
pub async fn fetch_manifest_of<T: Transport>(
    transport: &T,
    mirror: usize,
    id: Option<&[u8; 32]>,
    max_bytes: usize,
) -> Result<Vec<u8>, TransportError> {
    let body: &[u8] = id.map_or(&[], |id| id.as_slice());
    let request = wire::encode_envelope(SchemeId::Control, MessageKind::ManifestRequest, body);
    control(transport, mirror, request, MessageKind::Manifest, max_bytes).await
}

/// Asks mirror `mirror` which releases it serves (an unsigned hint, see
/// [`pir_service::releases`]).
pub async fn fetch_releases<T: Transport>(
    transport: &T,
    mirror: usize,
) -> Result<Vec<pir_service::ReleaseInfo>, TransportError> {
    let request = wire::encode_envelope(SchemeId::Control, MessageKind::ReleasesRequest, &[]);
    let max = 2 + pir_service::releases::MAX_RELEASES * 48;
    let body = control(transport, mirror, request, MessageKind::Releases, max).await?;
    pir_service::releases::decode_releases(&body).map_err(|e| TransportError::Http(e.to_string()))
}

/// One control exchange: the body of a reply of kind `expect`, or the mirror's refusal.
async fn control<T: Transport>(
    transport: &T,
    mirror: usize,
    request: Vec<u8>,
    expect: MessageKind,
    max_bytes: usize,
) -> Result<Vec<u8>, TransportError> {
    let reply = transport
        .exchange(mirror, request, max_bytes + wire::HEADER_LEN)
        .await?;
    let envelope = wire::decode_envelope(&reply, max_bytes)
        .map_err(|e| TransportError::Http(e.to_string()))?;
    match envelope.kind {
        kind if kind == expect => Ok(envelope.body.to_vec()),
        MessageKind::Error => {
            let (_, message) = wire::decode_error(envelope.body)
                .map_err(|e| TransportError::Http(e.to_string()))?;
            Err(TransportError::Refused(message))
        }
        other => Err(TransportError::Http(format!(
            "unexpected reply kind {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_parsing() {
        assert_eq!(
            authority_of("https://127.0.0.1:8443").unwrap(),
            "127.0.0.1:8443"
        );
        assert_eq!(
            authority_of("https://mirror.example:443/").unwrap(),
            "mirror.example:443"
        );
        assert!(authority_of("http://127.0.0.1:80").is_err());
        assert!(authority_of("https://host").is_err());
        assert!(authority_of("https://host:1/path").is_err());
    }

    #[test]
    fn reply_deadlines_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_seconds("5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_seconds(" 2.5 ").unwrap(), Duration::from_millis(2500));
        for bad in ["", "0", "-1", "soon", "NaN", "1e9"] {
            let error = parse_seconds(bad).unwrap_err();
            assert!(error.to_string().contains(REPLY_TIMEOUT_ENV), "{error}");
        }
        let default = Timeouts::default();
        assert!(default.reply_start <= Duration::from_secs(5));
        assert!(default.reply_start < default.total);
        assert_eq!(Timeouts::without_spare().reply_start, default.total);
    }

    #[test]
    fn transport_is_shareable() {
        // The transport is shared between concurrent tasks.
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<std::sync::Arc<HttpsTransport>>();
    }
}
