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
use pir_client::{ChecklistSession, Transport};
use pir_core::{Database, DbShape};
use pir_keys::{PublicKey, SecretKey};
use pir_safebrowsing::list::ListDatabase;
use pir_safebrowsing::{proto, PrefixList, Proxy};
use pir_service::checklist::{Checklist, Role};
use tokio::sync::Mutex;

use crate::cli::{
    SafeBrowsingCommand, SbBuildArgs, SbFirefoxArgs, SbProxyArgs, SbScheme, SbServeArgs,
    SbServeSettings, SbServersArgs,
};
use crate::server_config;

/// What users must trust, printed by every command that talks to the servers.
pub const PRIVACY: &str = "the two servers must not collude; each alone never learns which \
                           full hash was asked for (Checklist: it sees a set of records punctured \
                           at a random position; DPF: a pseudorandom key). They learn that a \
                           lookup happened.";

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
    let name = match &args.name {
        Some(name) => name.clone(),
        None => args
            .list
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "list".into()),
    };
    let (db, report) = ListDatabase::build(&name, &text)
        .with_context(|| format!("building from {}", args.list.display()))?;
    pir_fs::write_atomic_bytes(&args.out, &db.encode())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "database {} (list {name:?}): {} full hashes from {} entries ({} duplicates); id {}",
        args.out.display(),
        db.len(),
        report.entries,
        report.duplicates,
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
    Ok(())
}

/// Reads and checks a database file.
fn open_database(path: &Path) -> Result<ListDatabase> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    ListDatabase::decode(&bytes).with_context(|| format!("{}", path.display()))
}

/// `pir safebrowsing serve`.
async fn serve(flags: SbServeArgs) -> Result<()> {
    let defaults = server_config::defaults([("grace_seconds", toml::Value::Integer(10))]);
    let paths = ["db", "key"];
    let args: SbServeSettings =
        server_config::merge(defaults, flags.config.as_deref(), &flags, &paths)?;
    if args.server > 1 {
        bail!(
            "server must be 0 (offline) or 1 (online), not {}",
            args.server
        );
    }
    if flags.print_config {
        print!("{}", server_config::print(&args, &paths)?);
        return Ok(());
    }
    let key = SecretKey::load(&args.key)?;
    let list = open_database(&args.db)?;
    let role = Role::of(usize::from(args.server))?;
    let records = list.len() as u64;
    let params = pir_xor::checklist::Params::new(records, 32)?;
    let database = Database::from_bytes(DbShape::new(records, 32)?, &list.records())?;
    let mut backend = Checklist::new(
        params,
        database,
        list.id(),
        role,
        list.name().as_bytes().to_vec(),
    )?;
    if role == Role::Offline {
        backend = backend.with_download(&list.prefix_list().encode());
    }
    let service = Arc::new(backend.serve(SecretKey::from_pkcs8(key.pkcs8())?));
    let mut options = pir_server::ServerOptions::new(args.listen);
    if let Some(workers) = args.workers {
        options.workers = workers;
    }
    options.grace = std::time::Duration::from_secs(args.grace_seconds);
    options.admin_listen = args.admin_listen;
    let tls = pir_keys::tls::server_config(&key)?;
    let running = pir_server::start(service, tls, options)
        .await
        .context("starting the Safe Browsing server")?;
    println!(
        "safebrowsing server {} ({}) serving list {:?}: {} full hashes, database {} at https://{} with key {}",
        args.server,
        if role == Role::Offline { "offline: hints, refreshes, prefix list" } else { "online: lookups" },
        list.name(),
        list.len(),
        hex::encode(&list.id()[..8]),
        running.addr,
        key.public().fingerprint()
    );
    println!(
        "Checklist: {} sets of {} records per client (hints {} per client); health: https://{}/health",
        params.hints(),
        params.sets().size(),
        crate::human(params.hint_bytes() as u64),
        running.addr
    );
    println!("privacy: {PRIVACY}");
    crate::print_admin(&running);
    running.run_until_signal().await;
    Ok(())
}

/// `pir safebrowsing servers`.
fn write_servers(args: &SbServersArgs) -> Result<()> {
    let servers = args
        .servers
        .iter()
        .map(|arg| {
            let (url, key_path) = arg
                .split_once('=')
                .with_context(|| format!("{arg}: expected https://HOST:PORT=SERVER.pub"))?;
            Ok((url.to_string(), PublicKey::load(Path::new(key_path))?))
        })
        .collect::<Result<Vec<_>>>()?;
    let text = pir_client::servers_file::encode(SERVERS_HEADER, 2, &servers)
        .map_err(anyhow::Error::msg)
        .context("give --server URL=SERVER.pub for server 0 (offline), then server 1 (online)")?;
    std::fs::write(&args.out, &text).with_context(|| format!("writing {}", args.out.display()))?;
    println!("servers file {}:", args.out.display());
    print!("{text}");
    Ok(())
}

/// The proxy's state: the v4 message logic and the private-lookup session.
struct ProxyState {
    proxy: Proxy,
    session: Mutex<ChecklistSession>,
    dpf: bool,
    updates: std::sync::atomic::AtomicU64,
    lookups: std::sync::atomic::AtomicU64,
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
    let state_path = args.state.clone().unwrap_or_else(|| {
        let mut name = args.servers.as_os_str().to_owned();
        name.push(".state");
        PathBuf::from(name)
    });
    let dpf = args.scheme == SbScheme::Dpf;
    let session = if dpf {
        ChecklistSession::open_dpf(&servers).await
    } else {
        let bar = crate::byte_bar("hints");
        let session = ChecklistSession::open(&servers, Some(&state_path), &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
        .await;
        bar.finish_and_clear();
        session
    }
    .context("connecting to the Safe Browsing servers")?;
    let transport = pir_client::HttpsTransport::new(&servers[..1])?;
    let download = transport
        .hint(0, 64 << 20)
        .await
        .context("downloading the prefix list from server 0")?;
    let prefixes = pir_service::checklist::parse_download(&download)
        .map_err(anyhow::Error::from)
        .and_then(|bytes| Ok(PrefixList::decode(bytes, &session.info().database_id)?))
        .context("the prefix list from server 0")?;
    let lookups = if dpf {
        "DPF lookups, no hints".to_string()
    } else {
        format!(
            "Checklist lookups, hints {} ({})",
            crate::human(session.info().params.hint_bytes() as u64),
            if session.hints_downloaded() {
                "downloaded".to_string()
            } else {
                format!("loaded from {}", state_path.display())
            }
        )
    };
    println!(
        "list {:?}: {} full hashes ({} distinct prefixes); {lookups}",
        String::from_utf8_lossy(&session.info().about),
        prefixes.records(),
        prefixes.distinct().len(),
    );
    let state = Arc::new(ProxyState {
        proxy: Proxy::new(prefixes, proto::MALWARE_THREAT),
        session: Mutex::new(session),
        dpf,
        updates: Default::default(),
        lookups: Default::default(),
    });
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
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving the proxy")?;
    Ok(())
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
    let answer = pir_safebrowsing::proxy::request_bytes(uri.query(), &body)
        .and_then(|request| state.proxy.update(&request));
    match answer {
        Ok(bytes) => {
            state
                .updates
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            protobuf(bytes)
        }
        Err(e) => refuse(StatusCode::BAD_REQUEST, e),
    }
}

/// `fullHashes:find`: the records of each prefix, fetched privately.
async fn full_hashes(State(state): State<Arc<ProxyState>>, uri: Uri, body: Bytes) -> Response {
    let plan = pir_safebrowsing::proxy::request_bytes(uri.query(), &body)
        .and_then(|request| state.proxy.plan(&request, &mut rand::rng()));
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    let mut fetched = Vec::with_capacity(plan.indices.len());
    {
        let mut session = state.session.lock().await;
        for &index in &plan.indices {
            let record = if state.dpf {
                session.fetch_dpf(index).await
            } else {
                session.fetch(index).await
            };
            match record {
                Ok(record) => {
                    let mut hash = [0u8; 32];
                    if record.len() != 32 {
                        return refuse(StatusCode::BAD_GATEWAY, "a record is not a full hash");
                    }
                    hash.copy_from_slice(&record);
                    fetched.push(hash);
                }
                Err(e) => {
                    return refuse(
                        StatusCode::BAD_GATEWAY,
                        format!("private lookup failed: {e}"),
                    )
                }
            }
        }
    }
    state
        .lookups
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    protobuf(state.proxy.full_hashes(&plan, &fetched))
}

/// `GET /status`: how many updates and lookups the proxy served (for scripts and tests).
async fn status(State(state): State<Arc<ProxyState>>) -> Response {
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        format!(
            "updates {}\nlookups {}\nprefixes {}\n",
            load(&state.updates),
            load(&state.lookups),
            state.proxy.prefixes().distinct().len()
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
    std::fs::write(&path, firefox_prefs(url))
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
