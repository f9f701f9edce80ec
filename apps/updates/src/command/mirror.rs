//! `pir mirror serve`: one or more releases over HTTPS, declared on the server host.
//!
//! Every `--release DIR` is opened (blocks checked against the manifest), and the mirror
//! serves all of them at once, routing each query to the release it names. On SIGHUP the
//! directories are opened again: a directory that now holds another release (for example a
//! `current` symlink moved to the next release) adds it, and the release it held before is
//! retired: still served for `retire_seconds` so that fetches in progress finish, then
//! dropped. A release already served is not opened again. A reload that fails (a corrupt
//! copy, a missing file) changes nothing and is reported.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use pir_host::{status, Change, Common, CommonArgs, OneOrMany, Opening, Started};
use pir_service::{Mirror, ReleaseInfo, ServedRelease};
use serde::{Deserialize, Serialize};

use crate::{release, Manifest, MirrorList};

/// `pir mirror ...`.
#[derive(Debug, Subcommand)]
pub enum MirrorCommand {
    /// Serve a release: PIR answers and the manifest over HTTPS, /health, /metrics.
    ///
    /// The database is memory-mapped and every block is checked against the manifest before
    /// serving. TLS uses the mirror key, which clients pin from the signed mirror list; every
    /// answer is signed with it. The server never logs anything derived from a query.
    /// Settings can come from a TOML file (--config); flags override it.
    Serve(Box<MirrorServeArgs>),
    /// Ask the vendor service to list this mirror (signed with the mirror key); it is listed
    /// once the vendor's operator approves it and it passes a probe.
    Register(super::MirrorRegisterArgs),
}

/// `pir mirror serve`.
///
/// Speed settings (all also in the --config file):
/// - workers: threads that scan the database together for each pass (default: all cores).
/// - batch_window_ms: requests arriving within this many ms of the first waiting one are
///   answered in ONE pass over the database (default 2; 0 batches only what is already
///   queued). Each answer is exactly what the query gets alone.
/// - max_batch: most requests per pass (default 64).
/// - grace_seconds: on SIGTERM or Ctrl-C, requests in flight get this long to finish before
///   their connections are closed (default 10); no new connection is accepted meanwhile.
/// - four_russians: auto | off | 1 to 8. Precomputes, for every group of t blocks, the
///   XOR of each subset, so a query reads B/t blocks instead of B. Costs (2^t - 1)/t x the
///   database in RAM (t = 4: 3.75x, t = 8: 31.9x) and a build at start-up. auto uses t = 4
///   for blocks of 1 KiB and more (below that it is not reliably faster than the plain scan
///   on our measurements) when the table fits four_russians_memory_gib.
/// - four_russians_memory_gib: largest table to build (default 4).
/// - lock_in_ram: copy the database into huge pages and mlock it, so it is never paged out and
///   the scans take fewer TLB misses (needs `ulimit -l`).
#[derive(Debug, Default, Args, Serialize)]
#[command(verbatim_doc_comment)]
pub struct MirrorServeArgs {
    /// TOML file with any of: release (a path or a list), mirror_list, retire_seconds, key, listen,
    /// legacy_http, admin_listen, workers, skip_verify, batch_window_ms, max_batch,
    /// grace_seconds, four_russians, four_russians_memory_gib, lock_in_ram, max_connections,
    /// header_timeout_seconds, body_timeout_seconds, memory_budget_mib.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// A release directory (from `pir release build`); repeat to serve several at once. Each
    /// query goes to the release it names. SIGHUP opens the directories again: a directory
    /// that now holds another release (a moved `current` symlink) adds it and retires the
    /// old one (see --retire-seconds, default 600 here).
    #[arg(long, value_name = "RELEASE")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub release: Vec<PathBuf>,
    /// The vendor's current signed mirror list (from `pir mirror-list build`), served at
    /// GET /pir/v1/hint so that clients learn a newer list from any mirror (they check the
    /// vendor's signature, version and expiry). SIGHUP reads it again: put the new list there.
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror_list: Option<PathBuf>,
    /// Also serve plain, NOT private, downloads at http://ADDR/files/NAME for old clients.
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub legacy_http: Option<SocketAddr>,
    /// Skip checking every block against the manifest at start-up.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skip_verify: bool,
    /// Four-Russians tables: auto, off, or a group size 1 to 8 (default auto).
    #[arg(long, value_name = "auto|off|T")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub four_russians: Option<String>,
    /// Largest four-Russians table, GiB (default 4).
    #[arg(long, value_name = "GIB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub four_russians_memory_gib: Option<f64>,
    /// Copy the database into huge pages locked in RAM (mlock): never paged out, and sparse
    /// scans of 4 KiB blocks about 1.4x faster than from the file map.
    #[arg(long)]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lock_in_ram: bool,
    /// Keep only these RAID-PIR chunks, as LIST/C (chunks 0 and 1 of 4: 0,1/4), with
    /// four-Russians tables only for them: about r/n of the release for n servers and
    /// redundancy r. Only RAID-PIR queries with C chunks whose position needs no other chunk
    /// are answered; list the mirror with the same chunks (pir mirror-list build
    /// --mirror-chunks URL=LIST/C).
    #[arg(long, value_name = "LIST/C")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<String>,
    /// The settings every server shares (key, listen, workers, limits...).
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,
    /// Print the effective settings (file and flags merged, defaults filled in) as a config
    /// file, and exit without serving.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
}

/// How long a replaced release is still served by default (fetches in progress finish).
pub const DEFAULT_RETIRE_SECONDS: u64 = 600;

/// The settings of `pir mirror serve` after defaults, file and flags are merged.
///
/// Each field is its flag's (see [`MirrorServeArgs`]), under the flag's name with `_`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MirrorSettings {
    /// The release directories (`--release`).
    pub release: OneOrMany,
    /// The signed mirror list to hand on to clients (`--mirror-list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_list: Option<PathBuf>,
    /// The plain, NOT private, download listener (`--legacy-http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy_http: Option<SocketAddr>,
    /// Serve without checking every block against the manifest (`--skip-verify`).
    pub skip_verify: bool,
    /// `auto`, `off` or a group size 1 to 8 (`--four-russians`).
    pub four_russians: String,
    /// Largest four-Russians table, GiB (`--four-russians-memory-gib`).
    pub four_russians_memory_gib: f64,
    /// Copy the database into locked huge pages (`--lock-in-ram`).
    pub lock_in_ram: bool,
    /// The RAID-PIR chunks kept, `LIST/C` (`--chunks`; none: the whole release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<String>,
    /// The settings every server shares.
    #[serde(flatten)]
    pub common: Common,
}

impl pir_host::Settings for MirrorSettings {
    const KEYS: &'static [&'static str] = &[
        "release",
        "mirror_list",
        "legacy_http",
        "skip_verify",
        "four_russians",
        "four_russians_memory_gib",
        "lock_in_ram",
        "chunks",
    ];
    const PATHS: &'static [&'static str] = &["release", "mirror_list"];

    fn defaults() -> toml::Table {
        let mut defaults = Common::defaults(DEFAULT_RETIRE_SECONDS);
        for (name, value) in [
            ("skip_verify", toml::Value::Boolean(false)),
            ("four_russians", toml::Value::String("auto".into())),
            ("four_russians_memory_gib", toml::Value::Float(4.0)),
            ("lock_in_ram", toml::Value::Boolean(false)),
        ] {
            defaults.insert(name.into(), value);
        }
        defaults
    }

    fn validate(&self) -> anyhow::Result<()> {
        let count = self.release.paths().len();
        if count == 0 {
            anyhow::bail!("no release: pass --release RELEASE or set it in --config");
        }
        if count > pir_service::releases::MAX_RELEASES {
            anyhow::bail!(
                "{count} releases; a mirror serves at most {}",
                pir_service::releases::MAX_RELEASES
            );
        }
        if let Some(chunks) = &self.chunks {
            crate::mirrors::parse_chunks(chunks)?;
            if self.legacy_http.is_some() {
                anyhow::bail!(
                    "a mirror holding only some chunks cannot serve whole files: leave out \
                     legacy_http or chunks"
                );
            }
        }
        self.engine().map(|_| ())
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

impl MirrorSettings {
    /// The engine options of `four_russians` and `four_russians_memory_gib`.
    pub fn engine(&self) -> anyhow::Result<pir_xor::EngineOptions> {
        let russians = match self.four_russians.as_str() {
            "auto" => pir_xor::Russians::Auto,
            "off" => pir_xor::Russians::Off,
            t => match t.parse::<usize>() {
                Ok(t) if pir_kernels::russians::GROUP_SIZES.contains(&t) => {
                    pir_xor::Russians::Group(t)
                }
                _ => anyhow::bail!(
                    "four_russians must be auto, off, or a group size 1 to 8, not {t:?}"
                ),
            },
        };
        let gib = self.four_russians_memory_gib;
        if !(0.0..=1024.0).contains(&gib) {
            anyhow::bail!("four_russians_memory_gib must be between 0 and 1024");
        }
        Ok(pir_xor::EngineOptions {
            russians,
            russians_memory_limit: (gib * (1u64 << 30) as f64) as usize,
        })
    }
}

/// `pir mirror serve`: resolves the settings, then prints them (`--print-config`) or serves.
pub(super) async fn serve(args: Box<MirrorServeArgs>) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<MirrorSettings, _>(
        args.config.as_deref(),
        &*args,
        args.print_config,
    )?
    else {
        return Ok(());
    };
    let mut host = pir_host::Host::new(&settings.common)?;
    host.options.legacy_listen = settings.legacy_http;
    let engine = settings.engine()?;
    let chunks = settings
        .chunks
        .as_deref()
        .map(crate::mirrors::parse_chunks)
        .transpose()?;
    pir_host::serve(
        host,
        Releases {
            settings,
            engine,
            chunks,
        },
    )
    .await
}

/// The mirror as a server kind: its releases are the versions.
struct Releases {
    settings: MirrorSettings,
    engine: pir_xor::EngineOptions,
    /// `--chunks`: keep only these.
    chunks: Option<pir_xor::held::ChunkSet>,
}

impl pir_host::Kind for Releases {
    type Backend = Mirror;
    /// The signed mirror list served beside the releases, and what it says.
    type Opened = Option<(bytes::Bytes, MirrorList)>;
    const WHAT: &'static str = "the mirror";
    const UNIT: &'static str = "release(s)";

    fn open(&self, at: &Opening<'_, Mirror>) -> Result<pir_host::Versions<Self>> {
        let dirs = self.settings.release.paths();
        let mut wanted = Vec::with_capacity(dirs.len());
        for dir in &dirs {
            let manifest_path = dir.join(release::MANIFEST_FILE);
            let bytes = std::fs::read(&manifest_path)
                .with_context(|| format!("reading {}", manifest_path.display()))?;
            match at.reuse(&Manifest::release_id(&bytes)) {
                Some(served) => wanted.push(served.clone()),
                None => wanted.push(self.open_one(dir, at)?),
            }
        }
        Ok((wanted, self.open_mirror_list()?))
    }

    fn installed(&self, set: &pir_service::ReleaseSet<Mirror>, opened: &Self::Opened) {
        set.set_download(opened.as_ref().map(|(bytes, _)| bytes.clone()));
    }

    fn started(&self, started: &Started<'_, Self>) -> Vec<String> {
        let running = started.running;
        let mut lines: Vec<String> = started
            .set
            .current()
            .iter()
            .map(|served| {
                let backend = served.service.backend();
                let shape = backend.shape();
                let held = match backend.held_chunks() {
                    Some(held) => format!(
                        ", holding only chunks {}",
                        crate::mirrors::format_chunks(held.set())
                    ),
                    None => String::new(),
                };
                format!(
                    "mirror serving release {} (version {}, {} blocks of {} bytes{held}) at \
                     https://{} with key {}",
                    hex::encode(&served.info.id[..8]),
                    served.info.version,
                    shape.block_count(),
                    shape.block_size(),
                    running.addr,
                    started.key.public().fingerprint()
                )
            })
            .collect();
        if let Some((_, list)) = started.opened {
            lines.push(describe_list(list));
        }
        if let Some(addr) = running.legacy_addr {
            lines.push(format!(
                "legacy downloads (NOT private) at http://{addr}/files/NAME"
            ));
        }
        lines.push(format!(
            "health: https://{0}/health  metrics: https://{0}/metrics  (SIGHUP reloads the \
             releases; Ctrl-C or SIGTERM drains and stops)",
            running.addr
        ));
        lines
    }

    fn reloaded(&self, change: &Change<'_, Self>) -> String {
        let now: Vec<String> = change
            .now
            .iter()
            .map(|r| {
                format!(
                    "{} (version {}{})",
                    hex::encode(&r.info.id[..8]),
                    r.info.version,
                    if r.is_retired() { ", retired" } else { "" }
                )
            })
            .collect();
        let list = match change.opened {
            Some((_, list)) => format!("; {}", describe_list(list)),
            None => String::new(),
        };
        format!(
            "reloaded: {} release(s) added, {} retired (served {} s more), now serving {}{list}",
            change.added.len(),
            change.retired(),
            change.retire_after.as_secs(),
            now.join(", ")
        )
    }

    fn reload_failed(&self, _before: &[ReleaseInfo], error: &anyhow::Error) -> String {
        format!("reload failed, still serving the releases as before: {error:#}")
    }
}

/// "serving mirror list version N (valid for 6 days more) at /pir/v1/hint".
fn describe_list(list: &MirrorList) -> String {
    format!(
        "serving mirror list version {} ({} mirrors, {}) at /pir/v1/hint",
        list.list_version,
        list.mirrors.len(),
        crate::freshness::describe_expiry(list.expires_unix, crate::freshness::now_unix())
    )
}

impl Releases {
    /// The `--mirror-list` file, if one is set: read whole and parsed (a mirror has no vendor
    /// key to check the signature with; clients check it), so that a damaged file fails the
    /// start or the reload instead of being handed on.
    fn open_mirror_list(&self) -> Result<Option<(bytes::Bytes, MirrorList)>> {
        let Some(path) = &self.settings.mirror_list else {
            return Ok(None);
        };
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let list = MirrorList::decode_unverified(&bytes)
            .with_context(|| format!("the mirror list {}", path.display()))?;
        Ok(Some((bytes::Bytes::from(bytes), list)))
    }

    /// Opens the release in `dir` (checking its blocks unless `skip_verify`) and builds its
    /// engine.
    fn open_one(&self, dir: &Path, at: &Opening<'_, Mirror>) -> Result<ServedRelease> {
        let verify = !self.settings.skip_verify;
        let lock = self.settings.lock_in_ram;
        status!(
            "opening {} (checking every block against the manifest: {verify})",
            dir.display()
        );
        let started = Instant::now();
        let opened = release::open_with(dir, None, verify, lock)?;
        status!(
            "release {} (version {}) loaded in {:.2} s{}",
            hex::encode(&opened.release_id[..8]),
            opened.manifest.release_version,
            started.elapsed().as_secs_f64(),
            if lock { " (locked in RAM)" } else { "" }
        );
        let (options, workers) = (self.engine, at.workers);
        if let Some(set) = &self.chunks {
            let served = crate::serve::served_chunks(
                opened,
                set.clone(),
                options,
                workers,
                at.key,
                at.metrics.clone(),
            )?;
            let backend = served.service.backend();
            let release = backend.shape().total_bytes();
            let mapped = backend.mapped_bytes();
            let tables = backend.held_chunks().map_or(0, |h| h.table_bytes());
            status!(
                "holding chunks {}: {} in memory ({} of rows, {} of four-Russians tables), \
                 {:.2}x the release",
                crate::mirrors::format_chunks(set),
                pir_host::log::human(mapped as u64),
                pir_host::log::human((mapped - tables) as u64),
                pir_host::log::human(tables as u64),
                mapped as f64 / release as f64
            );
            return Ok(served);
        }
        Ok(crate::serve::served(
            opened,
            |db| engine(db, options, workers),
            at.key,
            at.metrics.clone(),
            self.settings.legacy_http.is_some(),
        )?)
    }
}

/// The answering engine of a release, saying whether four-Russians tables are built, with a
/// progress bar while they are.
fn engine(
    database: pir_core::Database,
    options: pir_xor::EngineOptions,
    threads: usize,
) -> Result<pir_xor::Engine, crate::UpdateError> {
    let shape = database.shape();
    let bar = match pir_xor::Engine::plan_russians(shape, options) {
        Some(layout) => {
            status!(
                "building four-Russians tables: t = {}, {} ({:.2}x the database)",
                layout.group_size(),
                pir_host::log::human(layout.table_bytes() as u64),
                layout.table_bytes() as f64 / shape.total_bytes() as f64
            );
            let total = layout.super_groups() as u64;
            Some(pir_host::log::progress(
                "{bar:40} {percent}% {eta} left",
                total,
                false,
            ))
        }
        None => {
            if options.russians != pir_xor::Russians::Off {
                status!("four-Russians tables: not used for this shape (plain SIMD scan)");
            }
            None
        }
    };
    let engine = crate::serve::engine(database, options, threads, &|done, _| {
        if let Some(bar) = &bar {
            bar.set_position(done as u64);
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    engine
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_host::settings::{print_settings, resolve_text};

    /// The settings a config file `text` and the flags `args` give, as the mirror resolves them.
    fn resolve(text: &str, args: &MirrorServeArgs) -> Result<MirrorSettings> {
        resolve_text(Some((text, Path::new("/etc/pir/mirror.toml"))), args)
    }

    const BASE: &str = "key = \"mirror.key\"\nlisten = \"127.0.0.1:0\"\n";

    #[test]
    fn defaults_then_file_then_flags() {
        let settings = resolve(
            &format!("{BASE}release = [\"a\", \"b\"]\nfour_russians = \"off\"\n"),
            &MirrorServeArgs::default(),
        )
        .unwrap();
        assert_eq!(
            settings.release.paths(),
            vec![PathBuf::from("/etc/pir/a"), PathBuf::from("/etc/pir/b")]
        );
        assert_eq!(settings.four_russians, "off");
        assert_eq!(settings.four_russians_memory_gib, 4.0);
        assert!(!settings.skip_verify && !settings.lock_in_ram);
        assert_eq!(settings.common.retire_seconds, DEFAULT_RETIRE_SECONDS);
        let flags = MirrorServeArgs {
            four_russians: Some("8".into()),
            skip_verify: true,
            ..MirrorServeArgs::default()
        };
        let settings = resolve(&format!("{BASE}release = \"a\"\n"), &flags).unwrap();
        assert_eq!(settings.four_russians, "8");
        assert!(settings.skip_verify);
        let engine = settings.engine().unwrap();
        assert_eq!(engine.russians, pir_xor::Russians::Group(8));
        assert_eq!(engine.russians_memory_limit, 4 << 30);
        // What --print-config prints reads back the same.
        let printed = print_settings(&settings).unwrap();
        assert_eq!(
            resolve(&printed, &MirrorServeArgs::default()).unwrap(),
            settings
        );
    }

    #[test]
    fn bad_settings_are_refused_with_the_reason() {
        let refused = |extra: &str| {
            resolve(&format!("{BASE}{extra}"), &MirrorServeArgs::default())
                .unwrap_err()
                .to_string()
        };
        assert!(
            refused("release = []\n").contains("no release"),
            "{}",
            refused("")
        );
        assert!(refused("").contains("release"), "{}", refused(""));
        assert!(refused("release = \"a\"\nfour_russians = \"9\"\n").contains("group size 1 to 8"));
        assert!(refused("release = \"a\"\nfour_russians = \"on\"\n").contains("not \"on\""));
        assert!(
            refused("release = \"a\"\nfour_russians_memory_gib = -1.0\n")
                .contains("between 0 and 1024")
        );
        let many: Vec<String> = (0..=pir_service::releases::MAX_RELEASES)
            .map(|i| format!("\"r{i}\""))
            .collect();
        assert!(refused(&format!("release = [{}]\n", many.join(", ")))
            .contains("a mirror serves at most"));
    }
}
