//! `pir safebrowsing build|serve|servers|proxy|firefox-profile`: private Safe Browsing
//! (Checklist, Kogan and Corrigan-Gibbs 2021, section 7.2): two servers hold the list's full hashes, and a proxy on
//! the user's machine answers the browser's Safe Browsing v4 calls with private lookups.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use pir_core::{Database, DbShape};
use pir_host::{Change, Opening, Started};
use pir_keys::PublicKey;
use pir_safebrowsing::list::ListDatabase;
use pir_safebrowsing::LocalProxy;
use pir_service::checklist::{download_envelope, Checklist, Role};
use pir_service::{ReleaseInfo, ReleaseSet, ServedRelease};

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

/// `pir safebrowsing proxy`: [`LocalProxy`] on a bounded loopback listener
/// (`pir_server::local`: loopback `Host` names only, connection cap, timeouts, body limits),
/// refreshed from server 0 every `--refresh-seconds`.
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
    let bar = crate::byte_bar("hints");
    let shown = bar.clone();
    let progress: pir_safebrowsing::local::Progress = Arc::new(move |done, total| {
        shown.set_length(total);
        shown.set_position(done);
    });
    let dpf_all = args.scheme == SbScheme::Dpf;
    let opened = LocalProxy::open(servers, state_dir, dpf_all, progress).await;
    bar.finish_and_clear();
    let proxy = Arc::new(opened.context("connecting to the Safe Browsing servers")?);
    println!("{}", proxy.describe().await);
    let refresher = tokio::spawn(refresh_loop(
        proxy.clone(),
        std::time::Duration::from_secs(args.refresh_seconds.max(1)),
    ));
    let handler = move |request| {
        let proxy = proxy.clone();
        async move { proxy.handle(request).await }
    };
    let options = pir_server::local::LocalOptions::new(args.listen);
    let running = pir_server::local::start(options, handler)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = running.addr;
    println!("Safe Browsing v4 proxy at http://{addr}/v4/ (Ctrl-C stops)");
    println!(
        "Firefox: pir safebrowsing firefox-profile --proxy http://{addr} --out PROFILE, then \
         firefox --profile PROFILE"
    );
    println!("privacy: {PRIVACY}");
    running.run_until_signal().await;
    refresher.abort();
    Ok(())
}

/// Asks server 0 for a newer list every `every`.
async fn refresh_loop(proxy: Arc<LocalProxy>, every: std::time::Duration) {
    loop {
        tokio::time::sleep(every).await;
        match proxy.refresh().await {
            Ok(Some(message)) => println!("{message}"),
            Ok(None) => {}
            Err(e) => println!("list refresh failed, still using the version before: {e:#}"),
        }
    }
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
