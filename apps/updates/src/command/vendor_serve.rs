//! `pir vendor serve` and `pir vendor approve`: the vendor service on the server host.
//!
//! The service (HTTPS pinned to the vendor key) publishes the current signed mirror list at
//! `GET /pir/v1/hint` and answers the messages of [`crate::vendor::wire`] at `POST /pir/v1`
//! (the release id and list version, mirror registrations, clients' evidence). A task probes
//! every approved mirror each period and signs the next list from the outcomes
//! ([`Registry::publish`]). Every decision is a status line with its reason and a count in
//! `/metrics` (`pir_vendor_decisions_total{action,reason}`); nothing there comes from a
//! client's query (the vendor serves no PIR).
//!
//! State directory (`--state`, default the client state directory's `vendor/`):
//! `approved/KEYHEX` (the operator's approvals, `pir vendor approve`), `proven/KEYHEX` (proven
//! liars and the verdict; approving again removes it), `registered/KEYHEX` (each registered
//! mirror's URL) and `mirrors.pir` (the list published last, read back at start so versions
//! keep rising; give it to mirrors' `--mirror-list` as well).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Args;
use pir_core::codec::Codec;
use pir_core::wire::{self, ErrorCode, MessageKind};
use pir_core::SchemeId;
use pir_host::{status, Common, CommonArgs};
use pir_keys::{PublicKey, SecretKey};
use pir_service::{Handler, Metrics, Reply};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

use crate::freshness::now_unix;
use crate::release::{self, Release};
use crate::vendor::wire::{Outcome, VendorReply, VendorRequest, MAX_EVIDENCE_BYTES};
use crate::vendor::{judge_evidence, probe, Decision, Judgement, Registry};
use crate::MirrorList;

/// Default probe period, seconds.
pub const DEFAULT_PROBE_SECONDS: u64 = 60;

/// Default validity of the lists the service signs, hours: it signs a new one at half life.
pub const DEFAULT_LIST_VALID_HOURS: f64 = 24.0;

/// `pir vendor serve`.
#[derive(Debug, Default, Args, Serialize)]
pub struct VendorServeArgs {
    /// TOML file with any of: release, allow, probe_seconds, list_valid_hours, state, key,
    /// listen, and the limits every server takes.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// The current release (from `pir release build`): its id is published, probes and
    /// evidence are checked against it.
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<PathBuf>,
    /// A mirror's public key approved in advance (repeat for each).
    #[arg(long, value_name = "MIRROR.pub")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<PathBuf>,
    /// Seconds between probes of every mirror (default 60); a dead or lying mirror leaves the
    /// list within one period.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_seconds: Option<u64>,
    /// Hours each signed list stays valid (default 24); a new one is signed at half life.
    #[arg(long, value_name = "H")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_valid_hours: Option<f64>,
    /// The service's state directory (approvals, proven liars, registrations, the list).
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<PathBuf>,
    /// The settings every server shares (key, listen, limits...).
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Print the effective settings as a config file, and exit without serving.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
}

/// `pir vendor approve`.
#[derive(Debug, Args)]
pub struct VendorApproveArgs {
    /// The mirrors' public keys.
    #[arg(value_name = "MIRROR.pub", required = true)]
    pub mirrors: Vec<PathBuf>,
    /// The vendor service's state directory (as given to `pir vendor serve --state`).
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
}

/// The settings of `pir vendor serve` after defaults, file and flags are merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VendorSettings {
    /// The current release (`--release`).
    pub release: PathBuf,
    /// Keys approved in advance (`--allow`).
    #[serde(default)]
    pub allow: Vec<PathBuf>,
    /// Probe period, seconds (`--probe-seconds`).
    pub probe_seconds: u64,
    /// Validity of each list, hours (`--list-valid-hours`).
    pub list_valid_hours: f64,
    /// State directory (`--state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PathBuf>,
    /// The settings every server shares.
    #[serde(flatten)]
    pub common: Common,
}

impl pir_host::Settings for VendorSettings {
    const KEYS: &'static [&'static str] = &[
        "release",
        "allow",
        "probe_seconds",
        "list_valid_hours",
        "state",
    ];
    const PATHS: &'static [&'static str] = &["release", "allow", "state"];

    fn defaults() -> toml::Table {
        let mut defaults = Common::defaults(60);
        defaults.insert("allow".into(), toml::Value::Array(Vec::new()));
        defaults.insert(
            "probe_seconds".into(),
            toml::Value::Integer(DEFAULT_PROBE_SECONDS as i64),
        );
        defaults.insert(
            "list_valid_hours".into(),
            toml::Value::Float(DEFAULT_LIST_VALID_HOURS),
        );
        defaults
    }

    fn validate(&self) -> Result<()> {
        if !(1..=86_400).contains(&self.probe_seconds) {
            anyhow::bail!("probe_seconds must be from 1 to 86400");
        }
        if !(0.001..=87_600.0).contains(&self.list_valid_hours) {
            anyhow::bail!("list_valid_hours must be from 0.001 to 87600");
        }
        if self.list_valid_hours * 3600.0 < 2.0 * self.probe_seconds as f64 {
            anyhow::bail!(
                "list_valid_hours must cover at least two probe periods, or lists expire \
                 before the next is signed"
            );
        }
        Ok(())
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

impl VendorSettings {
    /// The state directory: `--state`, or `vendor/` in the client state directory.
    pub fn state_dir(&self) -> Result<PathBuf> {
        state_dir(self.state.as_deref())
    }
}

fn state_dir(explicit: Option<&Path>) -> Result<PathBuf> {
    match explicit {
        Some(dir) => Ok(dir.to_path_buf()),
        None => Ok(crate::freshness::state_dir(None)?.join("vendor")),
    }
}

/// The operator's files in the state directory.
#[derive(Debug, Clone)]
struct State {
    dir: PathBuf,
}

impl State {
    fn open(dir: PathBuf) -> Result<Self> {
        for sub in ["approved", "proven", "registered"] {
            std::fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("creating {}", dir.join(sub).display()))?;
        }
        Ok(Self { dir })
    }

    fn file(&self, sub: &str, key: &PublicKey) -> PathBuf {
        self.dir.join(sub).join(hex::encode(key.0))
    }

    /// `(key, contents)` of every file in `sub` named by a key.
    fn read(&self, sub: &str) -> Vec<(PublicKey, String)> {
        let Ok(entries) = std::fs::read_dir(self.dir.join(sub)) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let key: [u8; 32] = hex::decode(&name).ok()?.try_into().ok()?;
                let text = std::fs::read_to_string(e.path()).ok()?;
                Some((PublicKey(key), text.trim().to_owned()))
            })
            .collect()
    }

    fn write(&self, sub: &str, key: &PublicKey, text: &str) {
        let path = self.file(sub, key);
        if let Err(e) = pir_fs::write_atomic_bytes(&path, text.as_bytes()) {
            tracing::error!("writing {}: {e}", path.display());
        }
    }

    fn remove(&self, sub: &str, key: &PublicKey) {
        let _ = std::fs::remove_file(self.file(sub, key));
    }

    fn list_path(&self) -> PathBuf {
        self.dir.join("mirrors.pir")
    }
}

/// The vendor service: a [`Handler`] for the runtime, and the state the probe task updates.
pub struct VendorService {
    key: SecretKey,
    release: Release,
    registry: Mutex<Registry>,
    list: RwLock<Option<Bytes>>,
    state: State,
    allow: Vec<PublicKey>,
    valid_seconds: u64,
    metrics: Metrics,
    decisions: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
}

impl std::fmt::Debug for VendorService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendorService")
            .field("release", &self.release)
            .finish_non_exhaustive()
    }
}

impl VendorService {
    /// Opens the release (every block checked), the state directory and the list published
    /// before; takes the registrations kept there.
    pub fn open(settings: &VendorSettings, key: SecretKey) -> Result<Self> {
        let release = release::open(&settings.release, Some(&key.public()), true)
            .with_context(|| format!("opening the release {}", settings.release.display()))?;
        let allow = settings
            .allow
            .iter()
            .map(|path| PublicKey::load(path))
            .collect::<Result<Vec<_>, _>>()?;
        let state = State::open(settings.state_dir()?)?;
        let mut registry = Registry::new(key.public());
        let mut list = None;
        if let Ok(bytes) = std::fs::read(state.list_path()) {
            if let Ok(old) = MirrorList::decode_verified(&bytes, &key.public()) {
                registry.resume(&old);
                list = Some(Bytes::from(bytes));
            }
        }
        for (mirror, url) in state.read("registered") {
            // The service's own record of registrations it verified before a restart.
            registry.restore(mirror, url);
        }
        let service = Self {
            key,
            release,
            registry: Mutex::new(registry),
            list: RwLock::new(list),
            state,
            allow,
            valid_seconds: (settings.list_valid_hours * 3600.0) as u64,
            metrics: Metrics::default(),
            decisions: Mutex::new(BTreeMap::new()),
        };
        service.sync();
        Ok(service)
    }

    /// The current release id.
    pub fn release_id(&self) -> [u8; 32] {
        self.release.release_id
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Logs and counts `decisions`.
    fn record(&self, decisions: &[Decision]) {
        let mut counts = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
        for d in decisions {
            status!("{d}");
            *counts
                .entry((d.action.label(), d.reason.label()))
                .or_default() += 1;
        }
    }

    /// Reads the operator's approvals and proofs from the state directory.
    fn sync(&self) {
        let mut approved: HashSet<PublicKey> = self.allow.iter().copied().collect();
        approved.extend(self.state.read("approved").into_iter().map(|(k, _)| k));
        let proven: HashMap<PublicKey, String> = self.state.read("proven").into_iter().collect();
        let decisions = self.registry().sync(approved, proven);
        self.record(&decisions);
    }

    /// Signs and installs the next list if it changed (or ages).
    fn republish(&self) {
        let (bytes, decisions) = {
            let mut registry = self.registry();
            registry.publish(&self.key, now_unix(), self.valid_seconds)
        };
        self.record(&decisions);
        if let Some(bytes) = bytes {
            if let Err(e) = pir_fs::write_atomic_bytes(&self.state.list_path(), &bytes) {
                tracing::error!("writing {}: {e}", self.state.list_path().display());
            }
            let registry = self.registry();
            status!(
                "published mirror list version {} with {} mirror(s)",
                registry.list_version(),
                registry.listed().len()
            );
            *self.list.write().unwrap_or_else(|p| p.into_inner()) = Some(Bytes::from(bytes));
        }
    }

    /// One probe round: approvals read again, every approved mirror probed at once, the next
    /// list signed from the outcomes.
    pub async fn probe_round(self: &Arc<Self>) {
        self.sync();
        let mirrors = self.registry().to_probe();
        let mut tasks = tokio::task::JoinSet::new();
        for mirror in mirrors {
            let service = self.clone();
            tasks.spawn(async move {
                let probed = service.probe_one(&mirror).await;
                (mirror, probed)
            });
        }
        while let Some(done) = tasks.join_next().await {
            if let Ok((mirror, probed)) = done {
                if probed.outcome != crate::vendor::ProbeOutcome::Passed {
                    tracing::warn!(mirror = %mirror.url, "probe failed: {:?}", probed.outcome);
                }
                // The list states what the probe found it serving and holding.
                let found = crate::MirrorEntry {
                    release: probed.release,
                    chunks: probed.chunks,
                    ..mirror
                };
                self.registry().probed(&found, probed.outcome);
            }
        }
        self.republish();
    }

    async fn probe_one(&self, mirror: &crate::MirrorEntry) -> probe::Probed {
        let timeouts = pir_client::Timeouts {
            connect: Duration::from_secs(3),
            reply_start: Duration::from_secs(5),
            total: Duration::from_secs(20),
        };
        let transport = match pir_client::HttpsTransport::with_timeouts(
            &[(mirror.url.clone(), mirror.key)],
            timeouts,
        ) {
            Ok(t) => t,
            Err(e) => {
                return probe::Probed {
                    outcome: crate::vendor::ProbeOutcome::Dead(e.to_string()),
                    release: None,
                    chunks: None,
                }
            }
        };
        // The chunks it says it holds (`pir mirror serve --chunks`); without a health line
        // it is probed as a whole mirror, and a chunk-only one then fails the probe.
        let chunks = transport
            .get_plain(0, "/health", 4096)
            .await
            .ok()
            .and_then(|body| probe::chunks_in_health(&String::from_utf8_lossy(&body)));
        let mut rng = rand_chacha::ChaCha20Rng::from_os_rng();
        probe::probe(
            &transport,
            mirror.key,
            chunks.as_ref(),
            &self.release,
            &mut rng,
        )
        .await
    }

    /// Answers one request envelope.
    fn handle_one(&self, request: &[u8]) -> Reply {
        let parsed =
            wire::decode_envelope(request, MAX_EVIDENCE_BYTES + 4096).and_then(|envelope| {
                if envelope.scheme != SchemeId::Control || envelope.kind != MessageKind::Query {
                    return Err(pir_core::Error::Malformed(
                        "the vendor service takes vendor requests only".into(),
                    ));
                }
                VendorRequest::from_bytes(envelope.body, &())
            });
        let request = match parsed {
            Ok(request) => request,
            Err(e) => {
                let body = wire::encode_error(ErrorCode::BadRequest, &e.to_string());
                return Reply {
                    status: 400,
                    body: wire::encode_envelope(SchemeId::Control, MessageKind::Error, &body),
                };
            }
        };
        let (outcome, message) = match request {
            VendorRequest::Status => (Outcome::Status, "current release and list".to_owned()),
            VendorRequest::Register(signed) => {
                let decision = self.registry().register(&signed, now_unix());
                self.record(std::slice::from_ref(&decision));
                let outcome = match decision.action {
                    crate::vendor::Action::Pending => Outcome::Pending,
                    crate::vendor::Action::Admitted => Outcome::Admitted,
                    _ => Outcome::Refused,
                };
                if outcome != Outcome::Refused {
                    let r = &signed.registration;
                    self.state.write("registered", &r.mirror, &r.url);
                }
                (outcome, decision.detail)
            }
            VendorRequest::Evidence(bytes) => self.evidence(&bytes),
        };
        let reply = VendorReply {
            outcome,
            message,
            release_id: self.release.release_id,
            list_version: self.registry().list_version(),
        };
        Reply {
            status: 200,
            body: wire::encode_envelope(SchemeId::Control, MessageKind::Answer, &reply.to_bytes()),
        }
    }

    /// Judges evidence; a proven mirror is dropped from a list signed at once.
    fn evidence(&self, bytes: &[u8]) -> (Outcome, String) {
        match judge_evidence(bytes, &self.release) {
            Judgement::Proven(evidence, line) => {
                status!("evidence: {line}");
                self.state.write("proven", &evidence.key, &line);
                self.state.remove("approved", &evidence.key);
                self.registry().prove(evidence.key, line.clone());
                self.republish();
                (
                    Outcome::Proven,
                    format!("{line}; dropped from the mirror list"),
                )
            }
            Judgement::NotProven(why) => {
                status!("evidence proves nothing: {why}");
                (Outcome::NotProven, why)
            }
        }
    }
}

impl Handler for VendorService {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        requests.iter().map(|r| self.handle_one(r)).collect()
    }

    fn max_request_bytes(&self) -> usize {
        MAX_EVIDENCE_BYTES + 4096
    }

    fn health(&self) -> String {
        let registry = self.registry();
        format!(
            "ok: vendor, release {}, mirror list version {} with {} mirror(s)",
            hex::encode(&self.release.release_id[..8]),
            registry.list_version(),
            registry.listed().len()
        )
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn render_metrics(&self) -> String {
        let mut text = self.metrics.render();
        let registry = self.registry();
        text += "# HELP pir_vendor_mirrors_listed Mirrors on the current list.\n";
        text += "# TYPE pir_vendor_mirrors_listed gauge\n";
        text += &format!("pir_vendor_mirrors_listed {}\n", registry.listed().len());
        text += "# HELP pir_vendor_list_version Version of the current list.\n";
        text += "# TYPE pir_vendor_list_version gauge\n";
        text += &format!("pir_vendor_list_version {}\n", registry.list_version());
        text +=
            "# HELP pir_vendor_decisions_total Decisions about mirrors, by action and reason.\n";
        text += "# TYPE pir_vendor_decisions_total counter\n";
        let counts = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
        for ((action, reason), n) in counts.iter() {
            text += &format!(
                "pir_vendor_decisions_total{{action=\"{action}\",reason=\"{reason}\"}} {n}\n"
            );
        }
        text
    }

    fn hint(&self) -> Option<Bytes> {
        self.list.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A vendor service started in this process (tests, the binary's `serve`).
pub struct RunningVendor {
    /// The HTTPS listener.
    pub server: pir_server::RunningServer,
    /// The service.
    pub service: Arc<VendorService>,
    prober: tokio::task::JoinHandle<()>,
}

impl RunningVendor {
    /// Stops probing and serving.
    pub async fn shutdown(self) {
        self.prober.abort();
        self.server.shutdown().await;
    }
}

/// Opens the service of `settings` and starts it: HTTPS, and a probe round every period
/// (the first at once).
pub async fn start(settings: &VendorSettings) -> Result<RunningVendor> {
    let host = pir_host::Host::new(&settings.common)?;
    let service = Arc::new(VendorService::open(settings, host.key_copy()?)?);
    let server = host.start(service.clone(), "the vendor service").await?;
    let period = Duration::from_secs(settings.probe_seconds);
    let prober = {
        let service = service.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                service.probe_round().await;
            }
        })
    };
    Ok(RunningVendor {
        server,
        service,
        prober,
    })
}

/// `pir vendor serve`.
pub(super) async fn serve(args: &VendorServeArgs) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<VendorSettings, _>(
        args.config.as_deref(),
        args,
        args.print_config,
    )?
    else {
        return Ok(());
    };
    let running = start(&settings).await?;
    println!(
        "vendor service for release {} at https://{} with key {} (mirror list at /pir/v1/hint, \
         probes every {} s, state in {})",
        hex::encode(&running.service.release_id()[..8]),
        running.server.addr,
        running.service.key.public().fingerprint(),
        settings.probe_seconds,
        running.service.state.dir.display()
    );
    let RunningVendor { server, prober, .. } = running;
    server.run_until_signal().await;
    prober.abort();
    Ok(())
}

/// Records the operator's approval of `key` in the state directory `dir` and lifts a
/// proven-liar mark; returns whether there was one.
pub fn approve_key(dir: &Path, key: &PublicKey) -> Result<bool> {
    let state = State::open(dir.to_path_buf())?;
    let was_proven = state.file("proven", key).exists();
    let approved = state.file("approved", key);
    pir_fs::write_atomic_bytes(&approved, key.to_text().as_bytes())
        .with_context(|| format!("writing {}", approved.display()))?;
    state.remove("proven", key);
    Ok(was_proven)
}

/// `pir vendor approve`: records each key's approval (and lifts a proven liar's ban); the
/// running service reads it at its next probe round.
pub(super) fn approve(args: &VendorApproveArgs) -> Result<()> {
    let dir = state_dir(args.state.as_deref())?;
    for path in &args.mirrors {
        let key = PublicKey::load(path)?;
        let was_proven = approve_key(&dir, &key)?;
        println!(
            "approved mirror key {}{}: the vendor service lists it once it registers and passes a probe",
            key.fingerprint(),
            if was_proven { " (its proven-liar mark is lifted)" } else { "" }
        );
    }
    Ok(())
}
