//! `pir safebrowsing build|serve|servers|proxy|firefox-profile`: private Safe Browsing
//! (Checklist, seed 004, section 7.2): two servers hold the list's full hashes, and a proxy on
//! the user's machine answers the browser's Safe Browsing v4 calls with private lookups.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use pir_client::{ChecklistSession, Transport};
use pir_core::{Database, DbShape};
use pir_host::{Change, Opening, Started};
use pir_keys::PublicKey;
use pir_safebrowsing::list::ListDatabase;
use pir_safebrowsing::{proto, ListIndex, Proxy};
use pir_service::checklist::{download_envelope, Checklist, Role};
use pir_service::{ReleaseInfo, ReleaseSet, ServedRelease};
use tokio::sync::Mutex;

use crate::cli::{
    SafeBrowsingCommand, SbBuildArgs, SbFirefoxArgs, SbProxyArgs, SbScheme, SbServeArgs,
    SbServeSettings, SbServersArgs,
};

/// What users must trust, printed by every command that talks to the servers: the
/// registry's entries of the two schemes a Safe Browsing server answers.
pub const PRIVACY: pir_service::registry::Privacy =
    pir_service::registry::Privacy(pir_service::checklist::Checklist::SCHEMES);

/// First line of a servers file.
pub const SERVERS_HEADER: &str = "pir-safebrowsing-servers-v1";

/// Runs one `pir safebrowsing` command.
pub async fn run(command: SafeBrowsingCommand) -> Result<()> {
    match command {
        SafeBrowsingCommand::Build(args) => build(&args),
        SafeBrowsingCommand::Serve(args) => serve(args).await,
        SafeBrowsingCommand::Servers(args) => write_servers(&args),
        SafeBrowsingCommand::Proxy(args) => proxy(&args).await,
        SafeBrowsingCommand::FirefoxProfile(args) => firefox_profile(&args),
    }
}

/// `pir safebrowsing build`.
fn build(args: &SbBuildArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.list)
        .with_context(|| format!("reading the list {}", args.list.display()))?;
    let (db, report) = if args.update {
        let old = open_database(&args.out).context(
            "--update makes the next version of an existing database: build it first without \
             --update",
        )?;
        let (db, report, step) = old
            .update(&text)
            .with_context(|| format!("updating from {}", args.list.display()))?;
        let created: Vec<usize> = db
            .buckets()
            .iter()
            .filter(|b| step.created.contains(&b.id))
            .map(|b| b.len())
            .collect();
        let hinted: usize = created.iter().filter(|&&n| n >= db.dpf_below()).sum();
        let by_dpf: usize = created.iter().filter(|&&n| n < db.dpf_below()).sum();
        println!(
            "version {} of list {:?}: {} added, {} removed; {} bucket(s) made, {} dropped; a \
             client fetches hints for {hinted} records ({:.1} % of re-hinting all {}) and looks \
             up {by_dpf} by DPF",
            db.version(),
            db.name(),
            step.added,
            step.removed,
            step.created.len(),
            step.dropped.len(),
            100.0 * hinted as f64 / db.len().max(1) as f64,
            db.len()
        );
        (db, report)
    } else {
        let name = match &args.name {
            Some(name) => name.clone(),
            None => args
                .list
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "list".into()),
        };
        ListDatabase::build_with(&name, &text, args.bucket_base)
            .with_context(|| format!("building from {}", args.list.display()))?
    };
    pir_fs::write_atomic_bytes(&args.out, &db.encode())
        .with_context(|| format!("writing {}", args.out.display()))?;
    let buckets = db.buckets();
    println!(
        "database {} (list {:?}, version {}): {} full hashes from {} entries ({} duplicates) in \
         {} bucket(s) of {} records (DPF below {}); id {}",
        args.out.display(),
        db.name(),
        db.version(),
        db.len(),
        report.entries,
        report.duplicates,
        buckets.len(),
        buckets
            .iter()
            .map(|b| b.len().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        db.dpf_below(),
        hex::encode(&db.id()[..8])
    );
    if report.skipped_count > 0 {
        println!(
            "skipped {} lines that are not URLs or hosts:",
            report.skipped_count
        );
        for (line, why) in &report.skipped {
            println!("  line {line}: {why}");
        }
    }
    if args.update {
        println!("serve it: send the servers SIGHUP (kill -HUP PID) or restart them");
    }
    Ok(())
}

/// Reads and checks a database file.
fn open_database(path: &Path) -> Result<ListDatabase> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    ListDatabase::decode(&bytes).with_context(|| format!("{}", path.display()))
}

/// One Checklist service per bucket of `list` (those served already, `at.served`, are reused).
fn bucket_services(
    list: &ListDatabase,
    role: Role,
    at: &Opening<'_, Checklist>,
) -> Result<Vec<ServedRelease<Checklist>>> {
    list.buckets()
        .iter()
        .map(|bucket| {
            let info = ReleaseInfo {
                id: bucket.database_id,
                version: list.version(),
                expires_unix: u64::MAX,
            };
            if let Some(served) = at.reuse(&bucket.database_id) {
                return Ok(ServedRelease::new(info, served.service.clone()));
            }
            let records = bucket.len() as u64;
            let params = pir_xor::checklist::Params::new(records, 32)?;
            let database = Database::from_bytes(DbShape::new(records, 32)?, bucket.records)?;
            let backend = Checklist::new(
                params,
                database,
                bucket.database_id,
                role,
                list.name().as_bytes().to_vec(),
            )?;
            let service = backend
                .serve(at.key_copy()?)
                .with_metrics(at.metrics.clone());
            Ok(ServedRelease::new(info, Arc::new(service)))
        })
        .collect()
}

/// `pir safebrowsing serve`.
async fn serve(flags: SbServeArgs) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<SbServeSettings, _>(
        flags.config.as_deref(),
        &flags,
        flags.print_config,
    )?
    else {
        return Ok(());
    };
    let host = pir_host::Host::new(&settings.common)?;
    let role = Role::of(usize::from(settings.server))?;
    pir_host::serve(host, Buckets { settings, role }).await
}

/// `pir safebrowsing serve` as a server kind: the buckets of the list are the versions (a
/// reload keeps the buckets the new version still has and retires the others); server 0
/// also serves the list index as its download.
struct Buckets {
    settings: SbServeSettings,
    role: Role,
}

impl pir_host::Kind for Buckets {
    type Backend = Checklist;
    type Opened = ListDatabase;
    const WHAT: &'static str = "the Safe Browsing server";
    const UNIT: &'static str = "bucket(s)";

    fn open(&self, at: &Opening<'_, Checklist>) -> Result<pir_host::Versions<Self>> {
        let list = open_database(&self.settings.db)?;
        let services = bucket_services(&list, self.role, at)?;
        Ok((services, list))
    }

    fn installed(&self, set: &ReleaseSet<Checklist>, list: &ListDatabase) {
        if self.role == Role::Offline {
            set.set_download(Some(download_envelope(&list.index().encode())));
        }
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let (list, addr) = (started.opened, started.running.addr);
        let hints: usize = list
            .buckets()
            .iter()
            .filter(|b| b.len() >= list.dpf_below())
            .map(|b| {
                pir_xor::checklist::Params::new(b.len() as u64, 32).map_or(0, |p| p.hint_bytes())
            })
            .sum();
        vec![
            format!(
                "safebrowsing server {} ({}) serving list {:?} version {}: {} full hashes in {} \
                 bucket(s), database {} at https://{addr} with key {}",
                self.settings.server,
                if self.role == Role::Offline {
                    "offline: hints, refreshes, list index"
                } else {
                    "online: lookups"
                },
                list.name(),
                list.version(),
                list.len(),
                list.buckets().len(),
                hex::encode(&list.id()[..8]),
                started.key.public().fingerprint()
            ),
            format!(
                "Checklist hints {} per client; buckets below {} records by DPF; health: \
                 https://{addr}/health (SIGHUP reloads the database)",
                crate::human(hints as u64),
                list.dpf_below(),
            ),
            format!("privacy: {PRIVACY}"),
        ]
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        let list = change.opened;
        format!(
            "reloaded list {:?} version {}: {} full hashes, {} bucket(s) ({} new)",
            list.name(),
            list.version(),
            list.len(),
            list.buckets().len(),
            change.added.len()
        )
    }

    fn reload_failed(&self, _before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!("reload failed, still serving as before: {error:#}")
    }
}

/// `pir safebrowsing servers`.
fn write_servers(args: &SbServersArgs) -> Result<()> {
    let servers = args
        .servers
        .iter()
        .map(|arg| crate::cli::parse_server(arg))
        .collect::<Result<Vec<_>>>()?;
    let text = pir_client::servers_file::encode(SERVERS_HEADER, 2, &servers)
        .map_err(anyhow::Error::msg)
        .context("give --server URL=SERVER.pub for server 0 (offline), then server 1 (online)")?;
    pir_fs::write_atomic_bytes(&args.out, text.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("servers file {}:", args.out.display());
    print!("{text}");
    Ok(())
}

/// Largest list index accepted from server 0.
const MAX_INDEX_BYTES: usize = 5 * pir_safebrowsing::list::MAX_ENTRIES + (1 << 16);

/// What the proxy looks up with: the v4 logic and one session per bucket.
struct Lookups {
    proxy: Proxy,
    sessions: HashMap<[u8; 32], ChecklistSession>,
}

/// The proxy's state.
struct ProxyState {
    servers: [(String, PublicKey); 2],
    state_dir: PathBuf,
    dpf_all: bool,
    lookups: Mutex<Lookups>,
    updates: AtomicU64,
    lookup_count: AtomicU64,
    refreshes: AtomicU64,
    hinted_records: AtomicU64,
}

fn state_file(dir: &Path, bucket: &[u8; 32]) -> PathBuf {
    dir.join(format!("{}.state", hex::encode(&bucket[..16])))
}

/// Opens a session for each bucket of `index` not in `have`: Checklist (hints from the saved
/// state or downloaded) for large buckets, DPF for those below the index's `dpf_below`.
async fn open_buckets(
    state: &ProxyState,
    index: &ListIndex,
    have: &[[u8; 32]],
) -> Result<HashMap<[u8; 32], ChecklistSession>> {
    let mut sessions = HashMap::new();
    for bucket in index.buckets() {
        if have.contains(&bucket.database_id) {
            continue;
        }
        let dpf_only = state.dpf_all || bucket.len() < index.dpf_below();
        let path = state_file(&state.state_dir, &bucket.database_id);
        let bar = crate::byte_bar("hints");
        let session = ChecklistSession::open_database(
            &state.servers,
            &bucket.database_id,
            (!dpf_only).then_some(path.as_path()),
            dpf_only,
            &mut |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            },
        )
        .await
        .with_context(|| format!("bucket {} of the list", bucket.id))?;
        bar.finish_and_clear();
        if session.hints_downloaded() {
            state
                .hinted_records
                .fetch_add(bucket.len() as u64, Ordering::Relaxed);
        }
        sessions.insert(bucket.database_id, session);
    }
    Ok(sessions)
}

/// The list index server 0 serves now.
async fn download_index(servers: &[(String, PublicKey); 2]) -> Result<ListIndex> {
    let transport = pir_client::HttpsTransport::new(&servers[..1])?;
    let download = transport
        .hint(0, MAX_INDEX_BYTES + 64)
        .await
        .context("downloading the list index from server 0")?;
    let bytes = pir_service::checklist::parse_download(&download)?;
    ListIndex::decode(bytes).context("the list index from server 0")
}

/// `pir safebrowsing proxy`.
async fn proxy(args: &SbProxyArgs) -> Result<()> {
    if !args.listen.ip().is_loopback() {
        bail!(
            "the proxy speaks plain HTTP and sees the browser's prefixes in the clear: listen on \
             a loopback address such as 127.0.0.1:{}",
            args.listen.port()
        );
    }
    let text = std::fs::read_to_string(&args.servers)
        .with_context(|| format!("reading {}", args.servers.display()))?;
    let servers =
        pir_client::servers_file::parse(SERVERS_HEADER, 2, "pir safebrowsing servers", &text)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("{}", args.servers.display()))?;
    let servers: [(String, PublicKey); 2] = [servers[0].clone(), servers[1].clone()];
    let state_dir = args.state.clone().unwrap_or_else(|| {
        let mut name = args.servers.as_os_str().to_owned();
        name.push(".state");
        PathBuf::from(name)
    });
    if state_dir.is_file() {
        bail!(
            "{} is a file; --state is a directory now (one file per bucket): remove it or \
             give another --state",
            state_dir.display()
        );
    }
    let index = download_index(&servers)
        .await
        .context("connecting to the Safe Browsing servers")?;
    let state = Arc::new(ProxyState {
        servers,
        state_dir,
        dpf_all: args.scheme == SbScheme::Dpf,
        lookups: Mutex::new(Lookups {
            proxy: Proxy::new(index.clone(), proto::MALWARE_THREAT),
            sessions: HashMap::new(),
        }),
        updates: AtomicU64::new(0),
        lookup_count: AtomicU64::new(0),
        refreshes: AtomicU64::new(0),
        hinted_records: AtomicU64::new(0),
    });
    let sessions = open_buckets(&state, &index, &[])
        .await
        .context("connecting to the Safe Browsing servers")?;
    let checklist = sessions.values().filter(|s| s.has_hints()).count();
    state.lookups.lock().await.sessions = sessions;
    remove_stale_state(&state.state_dir, &index);
    let about = {
        let lookups = state.lookups.lock().await;
        lookups
            .sessions
            .values()
            .next()
            .map(|s| String::from_utf8_lossy(&s.info().about).into_owned())
            .unwrap_or_default()
    };
    println!(
        "list {about:?} version {}: {} full hashes ({} distinct prefixes) in {} bucket(s), {} by \
         Checklist (hints for {} records downloaded, the rest kept in {}), the others by DPF",
        index.version(),
        index.records(),
        index.distinct().len(),
        index.buckets().len(),
        checklist,
        state.hinted_records.load(Ordering::Relaxed),
        state.state_dir.display()
    );
    let refresher = tokio::spawn(refresh_loop(
        state.clone(),
        std::time::Duration::from_secs(args.refresh_seconds.max(1)),
    ));
    let app = axum::Router::new()
        .route(
            "/v4/threatListUpdates:fetch",
            axum::routing::get(update).post(update),
        )
        .route(
            "/v4/fullHashes:find",
            axum::routing::get(full_hashes).post(full_hashes),
        )
        .route("/status", axum::routing::get(status))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr: SocketAddr = listener.local_addr()?;
    println!("Safe Browsing v4 proxy at http://{addr}/v4/ (Ctrl-C stops)");
    println!(
        "Firefox: pir safebrowsing firefox-profile --proxy http://{addr} --out PROFILE, then \
         firefox --profile PROFILE"
    );
    println!("privacy: {PRIVACY}");
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving the proxy");
    refresher.abort();
    served
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

/// Asks server 0 for a newer list every `every`.
async fn refresh_loop(state: Arc<ProxyState>, every: std::time::Duration) {
    loop {
        tokio::time::sleep(every).await;
        match refresh(&state).await {
            Ok(Some(message)) => println!("{message}"),
            Ok(None) => {}
            Err(e) => println!("list refresh failed, still using the version before: {e:#}"),
        }
    }
}

/// Switches to server 0's newest list version, if newer: sessions for its new buckets (hints
/// for those only), the old buckets' sessions dropped; the browser gets a partial update.
async fn refresh(state: &ProxyState) -> Result<Option<String>> {
    let transport = pir_client::HttpsTransport::new(&state.servers[..1])?;
    let served = pir_client::transport::fetch_releases(&transport, 0)
        .await
        .context("asking server 0 for its buckets")?;
    let current = state.lookups.lock().await.proxy.index().version();
    if served.iter().all(|r| r.version <= current) {
        return Ok(None);
    }
    let index = download_index(&state.servers).await?;
    if index.version() <= current {
        return Ok(None);
    }
    let have: Vec<[u8; 32]> = state
        .lookups
        .lock()
        .await
        .sessions
        .keys()
        .copied()
        .collect();
    let hinted_before = state.hinted_records.load(Ordering::Relaxed);
    let new = open_buckets(state, &index, &have).await?;
    let hinted = state.hinted_records.load(Ordering::Relaxed) - hinted_before;
    let added = new.len();
    let mut lookups = state.lookups.lock().await;
    let wanted: Vec<[u8; 32]> = index.buckets().iter().map(|b| b.database_id).collect();
    let before = lookups.sessions.len();
    lookups.sessions.retain(|id, _| wanted.contains(id));
    let dropped = before - lookups.sessions.len();
    lookups.sessions.extend(new);
    lookups.proxy.replace(index.clone());
    drop(lookups);
    remove_stale_state(&state.state_dir, &index);
    state.refreshes.fetch_add(1, Ordering::Relaxed);
    Ok(Some(format!(
        "list version {}: {} full hashes; {added} new bucket(s) (hints for {hinted} records), \
         {dropped} dropped",
        index.version(),
        index.records()
    )))
}

fn protobuf(bytes: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        bytes,
    )
        .into_response()
}

fn refuse(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain")],
        format!("{message}\n"),
    )
        .into_response()
}

/// `threatListUpdates:fetch`.
async fn update(State(state): State<Arc<ProxyState>>, uri: Uri, body: Bytes) -> Response {
    let request = match pir_safebrowsing::proxy::request_bytes(uri.query(), &body) {
        Ok(request) => request,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    let answer = state.lookups.lock().await.proxy.update(&request);
    match answer {
        Ok(bytes) => {
            state.updates.fetch_add(1, Ordering::Relaxed);
            protobuf(bytes)
        }
        Err(e) => refuse(StatusCode::BAD_REQUEST, e),
    }
}

/// `fullHashes:find`: the records of each prefix, fetched privately from every bucket.
async fn full_hashes(State(state): State<Arc<ProxyState>>, uri: Uri, body: Bytes) -> Response {
    let request = match pir_safebrowsing::proxy::request_bytes(uri.query(), &body) {
        Ok(request) => request,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    let mut lookups = state.lookups.lock().await;
    let plan = match lookups.proxy.plan(&request, &mut rand::rng()) {
        Ok(plan) => plan,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    let mut fetched = Vec::with_capacity(plan.fetches.len());
    for fetch in &plan.fetches {
        let Some(session) = lookups.sessions.get_mut(&fetch.bucket) else {
            return refuse(StatusCode::SERVICE_UNAVAILABLE, "the list is being updated");
        };
        let record = if session.has_hints() {
            session.fetch(fetch.position).await
        } else {
            session.fetch_dpf(fetch.position).await
        };
        match record {
            Ok(record) => match <[u8; 32]>::try_from(record.as_slice()) {
                Ok(hash) => fetched.push(hash),
                Err(_) => return refuse(StatusCode::BAD_GATEWAY, "a record is not a full hash"),
            },
            Err(e) => {
                return refuse(
                    StatusCode::BAD_GATEWAY,
                    format!("private lookup failed: {e}"),
                )
            }
        }
    }
    let reply = lookups.proxy.full_hashes(&plan, &fetched);
    drop(lookups);
    state.lookup_count.fetch_add(1, Ordering::Relaxed);
    protobuf(reply)
}

/// `GET /status`: what the proxy did (for scripts and tests).
async fn status(State(state): State<Arc<ProxyState>>) -> Response {
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let (version, buckets, prefixes, checklist) = {
        let lookups = state.lookups.lock().await;
        let index = lookups.proxy.index();
        (
            index.version(),
            index.buckets().len(),
            index.distinct().len(),
            lookups.sessions.values().filter(|s| s.has_hints()).count(),
        )
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        format!(
            "updates {}\nlookups {}\nprefixes {prefixes}\nversion {version}\nbuckets {buckets}\n\
             checklist_buckets {checklist}\nrefreshes {}\nhinted_records {}\n",
            load(&state.updates),
            load(&state.lookup_count),
            load(&state.refreshes),
            load(&state.hinted_records),
        ),
    )
        .into_response()
}

/// The preferences that make Firefox use the proxy as its Safe Browsing v4 provider.
///
/// Firefox (checked with ESR 153) builds v4 protobuf update requests only for the provider
/// named `google4` (any other name is "Unknown provider for protobuf" in its list manager), so
/// the profile points `google4` at the proxy instead of adding a provider of another name, and
/// empties Google's v2 and v5 providers (v5 otherwise claims `goog-malware-proto`). Every URL
/// that would reach Google (reports, advisories, data sharing, download checks) is blanked.
pub fn firefox_prefs(proxy: &str) -> String {
    let base = proxy.trim_end_matches('/');
    let provider = "browser.safebrowsing.provider.google4";
    let quoted = |v: &str| format!("\"{v}\"");
    let prefs: Vec<(String, String)> = vec![
        (format!("{provider}.pver"), quoted("4")),
        (format!("{provider}.lists"), quoted("goog-malware-proto")),
        (
            format!("{provider}.updateURL"),
            quoted(&format!(
                "{base}/v4/threatListUpdates:fetch?$ct=application/x-protobuf&key=pir&$httpMethod=POST"
            )),
        ),
        (
            format!("{provider}.gethashURL"),
            quoted(&format!(
                "{base}/v4/fullHashes:find?$ct=application/x-protobuf&key=pir&$httpMethod=POST"
            )),
        ),
        (format!("{provider}.reportURL"), quoted("")),
        (format!("{provider}.reportMalwareMistakeURL"), quoted("")),
        (format!("{provider}.reportPhishMistakeURL"), quoted("")),
        (format!("{provider}.advisoryURL"), quoted("")),
        (format!("{provider}.advisoryName"), quoted("pir")),
        (format!("{provider}.dataSharing.enabled"), "false".into()),
        (format!("{provider}.dataSharingURL"), quoted("")),
        // Fetch the list as soon as Firefox starts.
        (format!("{provider}.nextupdatetime"), quoted("1")),
        ("browser.safebrowsing.provider.google.lists".into(), quoted("")),
        ("browser.safebrowsing.provider.google5.lists".into(), quoted("")),
        ("browser.safebrowsing.provider.google5.enabled".into(), "false".into()),
        ("urlclassifier.malwareTable".into(), quoted("goog-malware-proto")),
        ("browser.safebrowsing.malware.enabled".into(), "true".into()),
        ("browser.safebrowsing.downloads.enabled".into(), "false".into()),
        ("browser.safebrowsing.downloads.remote.enabled".into(), "false".into()),
    ];
    let mut text = String::from(
        "// Written by `pir safebrowsing firefox-profile`: Safe Browsing through the pir proxy.\n",
    );
    for (name, value) in prefs {
        text.push_str(&format!("user_pref(\"{name}\", {value});\n"));
    }
    text
}

/// `pir safebrowsing firefox-profile`.
fn firefox_profile(args: &SbFirefoxArgs) -> Result<()> {
    let url = args.proxy.trim_end_matches('/');
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("--proxy is the proxy's http:// URL, e.g. http://127.0.0.1:8470");
    };
    let host = rest.split(':').next().unwrap_or(rest);
    if !(host == "127.0.0.1" || host == "localhost" || host == "[::1]") {
        bail!("--proxy must be on this machine (127.0.0.1, localhost or [::1])");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let path = args.out.join("user.js");
    pir_fs::write_atomic_bytes(&path, firefox_prefs(url).as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "Firefox profile {} (Safe Browsing v4 provider google4 pointed at {url}); start \
         Firefox with\n  \
         firefox --profile {} --no-remote",
        args.out.display(),
        args.out.display()
    );
    Ok(())
}
