//! The local proxy of `pir safebrowsing proxy`, as a library: [`LocalProxy`] holds the list
//! index, one private-lookup session per bucket of the list (Checklist with hints, or DPF), and
//! answers the browser's requests as plain `http` types ([`LocalProxy::handle`]). The binary
//! puts it behind `pir_server::local`, the bounded loopback listener that also refuses any
//! `Host` that is not a loopback name; nothing here opens a socket for the browser.
//!
//! # What Firefox sends, and what is refused
//!
//! Checked with Firefox ESR 153 (Debian's `firefox-esr`, headless, the profile that
//! `pir safebrowsing firefox-profile` writes), by logging what it sent to a stand-in server:
//! both calls are a `GET` of the configured URL with the protobuf request appended
//! base64url-encoded as `&$req=...` (so `$ct=application/x-protobuf` and `$httpMethod=POST` are
//! in the query), the header `X-HTTP-Method-Override: POST`, `Sec-Fetch-Site: none`,
//! `Sec-Fetch-Mode: no-cors`, and no body, no `Content-Type`, no `Origin`.
//!
//! A web page can make the browser send requests here too (a `no-cors` `fetch()`, an image, a
//! form), but without a CORS preflight, which this proxy never answers, it can set neither
//! `X-HTTP-Method-Override` nor a `Content-Type` of `application/x-protobuf`; its requests carry
//! `Sec-Fetch-Site: cross-site` (or `same-site`) and, for a POST, an `Origin`. So:
//! - a `GET` needs `$req` and `X-HTTP-Method-Override: POST` (what Firefox sends);
//! - a `POST` needs `Content-Type: application/x-protobuf` (other v4 clients, scripts);
//! - a request with an `Origin`, or with a `Sec-Fetch-Site` other than `none`, is refused;
//! - an update answers at most one list request per threat type, at most
//!   [`crate::proxy::MAX_LIST_REQUESTS`] in all ([`Proxy::update`]): one request can no longer
//!   ask for the full prefix list thousands of times.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use pir_client::{ChecklistSession, HttpsTransport, LookupScheme, SessionError, Transport};
use pir_keys::PublicKey;
use tokio::sync::Mutex;

use crate::list::{ListIndex, Threat, MAX_ENTRIES};
use crate::proxy::{request_bytes, Proxy};

/// Largest list index accepted from server 0.
pub const MAX_INDEX_BYTES: usize = 5 * MAX_ENTRIES + (1 << 16);
/// The content type of v4 protobuf messages.
pub const PROTOBUF: &str = "application/x-protobuf";
/// The update call's path.
pub const UPDATE_PATH: &str = "/v4/threatListUpdates:fetch";
/// The full-hash call's path.
pub const FIND_PATH: &str = "/v4/fullHashes:find";

/// Why the proxy could not start or refresh.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// A server could not be reached or answered wrongly.
    #[error("{what}: {source}")]
    Session {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: SessionError,
    },
    /// Server 0's list index is not one.
    #[error("the list index from server 0: {0}")]
    Index(String),
}

fn session_error(what: impl Into<String>) -> impl FnOnce(SessionError) -> LocalError {
    let what = what.into();
    move |source| LocalError::Session { what, source }
}

/// Opens a transport to the two servers (position 0 the offline server, 1 the online one).
pub type Connect<T> = Arc<dyn Fn() -> Result<T, SessionError> + Send + Sync>;
/// Told `(done, total)` bytes while hints download.
pub type Progress = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// The v4 logic and one session per bucket, changed together on a refresh.
struct Lookups<T> {
    proxy: Proxy,
    sessions: HashMap<[u8; 32], ChecklistSession<T>>,
}

/// What the proxy did, for `/status`.
#[derive(Debug, Default)]
struct Counts {
    updates: AtomicU64,
    lookups: AtomicU64,
    refreshes: AtomicU64,
    hinted_records: AtomicU64,
}

/// The state `GET /status` reports (counts only: no prefix, no URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Update calls answered.
    pub updates: u64,
    /// Full-hash calls answered.
    pub lookups: u64,
    /// Distinct 4-byte prefixes of the list.
    pub prefixes: usize,
    /// The list's version.
    pub version: u64,
    /// Buckets of the list.
    pub buckets: usize,
    /// Buckets looked up by Checklist (with hints).
    pub checklist_buckets: usize,
    /// Newer list versions switched to.
    pub refreshes: u64,
    /// Records whose hints were downloaded.
    pub hinted_records: u64,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "updates {}\nlookups {}\nprefixes {}\nversion {}\nbuckets {}\n\
             checklist_buckets {}\nrefreshes {}\nhinted_records {}\n",
            self.updates,
            self.lookups,
            self.prefixes,
            self.version,
            self.buckets,
            self.checklist_buckets,
            self.refreshes,
            self.hinted_records
        )
    }
}

/// The local Safe Browsing proxy: list index, sessions, counters.
pub struct LocalProxy<T = HttpsTransport> {
    connect: Connect<T>,
    keys: [PublicKey; 2],
    state_dir: PathBuf,
    scheme: LookupScheme,
    progress: Progress,
    lookups: Mutex<Lookups<T>>,
    counts: Counts,
}

impl<T> std::fmt::Debug for LocalProxy<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProxy")
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

/// Where the hints of `bucket` are kept.
fn state_file(dir: &Path, bucket: &[u8; 32]) -> PathBuf {
    dir.join(format!("{}.state", hex::encode(&bucket[..16])))
}

impl LocalProxy<HttpsTransport> {
    /// Connects to the servers (`(URL, key)`, server 0 first) over pinned HTTPS.
    pub async fn open(
        servers: [(String, PublicKey); 2],
        state_dir: PathBuf,
        scheme: LookupScheme,
        progress: Progress,
    ) -> Result<Self, LocalError> {
        let keys = [servers[0].1, servers[1].1];
        let connect: Connect<HttpsTransport> =
            Arc::new(move || HttpsTransport::new(&servers).map_err(SessionError::transport(0)));
        Self::open_with(connect, keys, state_dir, scheme, progress).await
    }
}

impl<T: Transport> LocalProxy<T> {
    /// Downloads the list index from server 0 and opens a session for each bucket: `scheme`
    /// (Checklist or SinglePass, hints from `state_dir` or downloaded) for large buckets, DPF
    /// for small ones (and for all with [`LookupScheme::Dpf`]). State files of buckets the list no longer has are deleted.
    pub async fn open_with(
        connect: Connect<T>,
        keys: [PublicKey; 2],
        state_dir: PathBuf,
        scheme: LookupScheme,
        progress: Progress,
    ) -> Result<Self, LocalError> {
        let index = download_index(
            &connect().map_err(session_error("connecting to the Safe Browsing servers"))?,
        )
        .await?;
        let proxy = Self {
            connect,
            keys,
            state_dir,
            scheme,
            progress,
            lookups: Mutex::new(Lookups {
                proxy: Proxy::new(index.clone()),
                sessions: HashMap::new(),
            }),
            counts: Counts::default(),
        };
        let sessions = proxy.open_buckets(&index, &[]).await?;
        proxy.lookups.lock().await.sessions = sessions;
        remove_stale_state(&proxy.state_dir, &index);
        Ok(proxy)
    }

    /// What `/health` and the start say about the lists: one line per list, served (with its
    /// prefixes) or missing (no source in the database: Firefox gets it empty).
    pub async fn lists(&self) -> String {
        let lookups = self.lookups.lock().await;
        let index = lookups.proxy.index();
        Threat::ALL
            .iter()
            .map(|&t| {
                if index.sources().contains(t) {
                    format!(
                        "list {} {}: {} prefixes\n",
                        t,
                        t.table(),
                        index.distinct_of(t).len()
                    )
                } else {
                    format!(
                        "missing {} {}: no source in the database, Firefox gets it empty\n",
                        t,
                        t.table()
                    )
                }
            })
            .collect()
    }

    /// One line on what was opened: the list, its buckets, how each is looked up.
    pub async fn describe(&self) -> String {
        let lookups = self.lookups.lock().await;
        let index = lookups.proxy.index();
        let about = lookups
            .sessions
            .values()
            .next()
            .map(|s| String::from_utf8_lossy(&s.info().about).into_owned())
            .unwrap_or_default();
        let checklist = lookups.sessions.values().filter(|s| s.has_hints()).count();
        format!(
            "list {about:?} version {}: {} full hashes ({} distinct prefixes) in {} bucket(s), {} \
             by {} (hints for {} records downloaded, the rest kept in {}), the others by DPF",
            index.version(),
            index.records(),
            index.distinct().len(),
            index.buckets().len(),
            checklist,
            match self.scheme {
                LookupScheme::SinglePass => "SinglePass",
                LookupScheme::Checklist | LookupScheme::Dpf => "Checklist",
            },
            self.counts.hinted_records.load(Ordering::Relaxed),
            self.state_dir.display()
        )
    }

    /// Opens a session for each bucket of `index` not in `have`.
    async fn open_buckets(
        &self,
        index: &ListIndex,
        have: &[[u8; 32]],
    ) -> Result<HashMap<[u8; 32], ChecklistSession<T>>, LocalError> {
        let mut sessions = HashMap::new();
        for bucket in index.buckets() {
            if have.contains(&bucket.database_id) {
                continue;
            }
            let what = || format!("bucket {} of the list", bucket.id);
            let dpf_only = self.scheme == LookupScheme::Dpf || bucket.len() < index.dpf_below();
            let scheme = if dpf_only {
                LookupScheme::Dpf
            } else {
                self.scheme
            };
            let path = state_file(&self.state_dir, &bucket.database_id);
            let transport = (self.connect)().map_err(session_error(what()))?;
            let progress = self.progress.clone();
            let session = ChecklistSession::open_lookups_with(
                transport,
                self.keys,
                Some(&bucket.database_id),
                (!dpf_only).then_some(path.as_path()),
                scheme,
                &mut move |done, total| progress(done, total),
            )
            .await
            .map_err(session_error(what()))?;
            if session.hints_downloaded() {
                self.counts
                    .hinted_records
                    .fetch_add(bucket.len() as u64, Ordering::Relaxed);
            }
            sessions.insert(bucket.database_id, session);
        }
        Ok(sessions)
    }

    /// Switches to server 0's newest list version, if newer: sessions for its new buckets
    /// (hints for those only), the old buckets' sessions dropped; browsers then get a partial
    /// update. Returns what changed, or `None` when the list is current.
    pub async fn refresh(&self) -> Result<Option<String>, LocalError> {
        let transport = (self.connect)().map_err(session_error("connecting to server 0"))?;
        let served = pir_client::transport::fetch_releases(&transport, 0)
            .await
            .map_err(SessionError::transport(0))
            .map_err(session_error("asking server 0 for its buckets"))?;
        let current = self.lookups.lock().await.proxy.index().version();
        if served.iter().all(|r| r.version <= current) {
            return Ok(None);
        }
        let index = download_index(&transport).await?;
        if index.version() <= current {
            return Ok(None);
        }
        let have: Vec<[u8; 32]> = self.lookups.lock().await.sessions.keys().copied().collect();
        let hinted_before = self.counts.hinted_records.load(Ordering::Relaxed);
        let new = self.open_buckets(&index, &have).await?;
        let hinted = self.counts.hinted_records.load(Ordering::Relaxed) - hinted_before;
        let added = new.len();
        let mut lookups = self.lookups.lock().await;
        let wanted: Vec<[u8; 32]> = index.buckets().iter().map(|b| b.database_id).collect();
        let before = lookups.sessions.len();
        lookups.sessions.retain(|id, _| wanted.contains(id));
        let dropped = before - lookups.sessions.len();
        lookups.sessions.extend(new);
        lookups.proxy.replace(index.clone());
        drop(lookups);
        remove_stale_state(&self.state_dir, &index);
        self.counts.refreshes.fetch_add(1, Ordering::Relaxed);
        Ok(Some(format!(
            "list version {}: {} full hashes; {added} new bucket(s) (hints for {hinted} records), \
             {dropped} dropped",
            index.version(),
            index.records()
        )))
    }

    /// What the proxy did so far.
    pub async fn status(&self) -> Status {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let lookups = self.lookups.lock().await;
        let index = lookups.proxy.index();
        Status {
            updates: load(&self.counts.updates),
            lookups: load(&self.counts.lookups),
            prefixes: index.distinct().len(),
            version: index.version(),
            buckets: index.buckets().len(),
            checklist_buckets: lookups.sessions.values().filter(|s| s.has_hints()).count(),
            refreshes: load(&self.counts.refreshes),
            hinted_records: load(&self.counts.hinted_records),
        }
    }

    /// Answers one request of the browser: `threatListUpdates:fetch`, `fullHashes:find` (GET
    /// with `$req`, or POST with a protobuf body) or `GET /status`. What is refused and why:
    /// the module documentation.
    pub async fn handle(&self, request: Request<Bytes>) -> Response<Bytes> {
        if let Some(refused) = refuse_cross_site(&request) {
            return refused;
        }
        let path = request.uri().path();
        if path == "/status" || path == "/health" {
            if request.method() != Method::GET && request.method() != Method::HEAD {
                return text(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "/status and /health answer GET",
                );
            }
            let body = if path == "/status" {
                self.status().await.to_string()
            } else {
                format!("ok\n{}", self.lists().await)
            };
            return text(StatusCode::OK, body.trim_end());
        }
        if path != UPDATE_PATH && path != FIND_PATH {
            return text(
                StatusCode::NOT_FOUND,
                "this proxy answers /v4/threatListUpdates:fetch, /v4/fullHashes:find, /status \
                 and /health",
            );
        }
        let message = match v4_message(&request) {
            Ok(message) => message,
            Err(refused) => return *refused,
        };
        if path == UPDATE_PATH {
            self.update(&message).await
        } else {
            self.full_hashes(&message).await
        }
    }

    /// `threatListUpdates:fetch`.
    async fn update(&self, message: &[u8]) -> Response<Bytes> {
        let answer = self.lookups.lock().await.proxy.update(message);
        match answer {
            Ok(bytes) => {
                self.counts.updates.fetch_add(1, Ordering::Relaxed);
                protobuf(bytes)
            }
            Err(e) => text(StatusCode::BAD_REQUEST, &e.to_string()),
        }
    }

    /// `fullHashes:find`: the records of each prefix, fetched privately from every bucket.
    async fn full_hashes(&self, message: &[u8]) -> Response<Bytes> {
        let mut lookups = self.lookups.lock().await;
        let plan = match lookups.proxy.plan(message, &mut rand::rng()) {
            Ok(plan) => plan,
            Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
        };
        let mut fetched = Vec::with_capacity(plan.fetches.len());
        for fetch in &plan.fetches {
            let Some(session) = lookups.sessions.get_mut(&fetch.bucket) else {
                return text(StatusCode::SERVICE_UNAVAILABLE, "the list is being updated");
            };
            let record = if session.has_hints() {
                session.fetch(fetch.position).await
            } else {
                session.fetch_dpf(fetch.position).await
            };
            match record {
                Ok(record) => match <[u8; 32]>::try_from(record.as_slice()) {
                    Ok(hash) => fetched.push(hash),
                    Err(_) => return text(StatusCode::BAD_GATEWAY, "a record is not a full hash"),
                },
                Err(e) => {
                    return text(
                        StatusCode::BAD_GATEWAY,
                        &format!("private lookup failed: {e}"),
                    )
                }
            }
        }
        let reply = lookups.proxy.full_hashes(&plan, &fetched);
        drop(lookups);
        self.counts.lookups.fetch_add(1, Ordering::Relaxed);
        protobuf(reply)
    }
}

/// The list index server 0 serves now.
async fn download_index<T: Transport>(transport: &T) -> Result<ListIndex, LocalError> {
    let download = transport
        .hint(0, MAX_INDEX_BYTES + 64)
        .await
        .map_err(SessionError::transport(0))
        .map_err(session_error("downloading the list index from server 0"))?;
    let bytes = pir_service::checklist::parse_download(&download)
        .map_err(|e| LocalError::Index(e.to_string()))?;
    ListIndex::decode(bytes).map_err(|e| LocalError::Index(e.to_string()))
}

/// Deletes the state files of buckets `index` no longer has.
fn remove_stale_state(dir: &Path, index: &ListIndex) {
    let keep: Vec<PathBuf> = index
        .buckets()
        .iter()
        .map(|b| state_file(dir, &b.database_id))
        .collect();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "state") && !keep.contains(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Refuses what only a web page makes a browser send: an `Origin`, or a `Sec-Fetch-Site`
/// other than `none` (a user's own navigation or the browser's internal requests).
fn refuse_cross_site<B>(request: &Request<B>) -> Option<Response<Bytes>> {
    let headers = request.headers();
    let site = headers.get("sec-fetch-site").map(|v| v.as_bytes());
    let from_page = headers.contains_key(header::ORIGIN) || site.is_some_and(|s| s != b"none");
    from_page.then(|| {
        text(
            StatusCode::FORBIDDEN,
            "requests from web pages are refused: this proxy answers the browser's own Safe \
             Browsing calls",
        )
    })
}

/// The protobuf message of a v4 call, or the refusal to answer with.
fn v4_message(request: &Request<Bytes>) -> Result<Vec<u8>, Box<Response<Bytes>>> {
    let query = request.uri().query();
    let has_req = query.is_some_and(|q| {
        q.split('&')
            .any(|pair| pair.starts_with("$req=") || pair.starts_with("%24req="))
    });
    let headers = request.headers();
    if request.method() == Method::GET {
        let overridden = headers
            .get("x-http-method-override")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"POST"));
        if !has_req || !overridden {
            return Err(Box::new(text(
                StatusCode::FORBIDDEN,
                "a GET carries its message in $req with X-HTTP-Method-Override: POST, as \
                 Firefox sends it",
            )));
        }
    } else if request.method() == Method::POST {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim());
        if !content_type.is_some_and(|t| t.eq_ignore_ascii_case(PROTOBUF)) {
            return Err(Box::new(text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a POST body is a protobuf message: Content-Type: application/x-protobuf",
            )));
        }
    } else {
        let mut refused = text(StatusCode::METHOD_NOT_ALLOWED, "use GET with $req, or POST");
        refused
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, POST"));
        return Err(Box::new(refused));
    }
    request_bytes(query, request.body())
        .map_err(|e| Box::new(text(StatusCode::BAD_REQUEST, &e.to_string())))
}

fn protobuf(bytes: Vec<u8>) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(bytes));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(PROTOBUF),
    );
    response
}

fn text(status: StatusCode, message: &str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(format!("{message}\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}
