//! Settings of every server: built-in defaults, then the TOML file (`--config`), then the
//! flags given, merged into one validated settings struct per server kind; `--print-config`
//! prints the result as a file.
//!
//! A kind's settings struct is a serde struct whose field names are its long flag names with
//! `_` for `-` (`grace_seconds` for `--grace-seconds`), with the settings every server shares
//! ([`Common`]) flattened into it. Its flags struct (clap) flattens [`CommonArgs`] the same way
//! and serializes only the flags given, so an absent flag never hides the file's value.
//!
//! Relative paths in a file are taken relative to the file's directory; printed files hold
//! absolute paths, so they stay right wherever they are saved. A key the kind does not know is
//! an error that names it (serde's `deny_unknown_fields` does not work with `flatten`, so
//! [`merge_text`] checks the keys itself).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The settings of one server kind (see the module documentation).
pub trait Settings: Serialize + DeserializeOwned {
    /// The kind's own keys ([`Common::KEYS`] are added): any other key is refused by name,
    /// before a missing one is reported.
    const KEYS: &'static [&'static str];

    /// The kind's own fields that hold paths ([`Common::PATHS`] are added).
    const PATHS: &'static [&'static str];

    /// The kind's defaults, before the config file and the flags; [`Common::defaults`] is
    /// usually where they start.
    fn defaults() -> toml::Table;

    /// Checks what serde cannot (ranges, combinations); [`Common::validate`] is checked too.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// The part every server shares.
    fn common(&self) -> &Common;
}

/// Resolves the settings of kind `S` from the file at `config` (if any) and `flags`; with
/// `print_config`, prints them as a config file on standard output and returns `None`.
pub fn load<S: Settings, F: Serialize>(
    config: Option<&Path>,
    flags: &F,
    print_config: bool,
) -> Result<Option<S>> {
    let text = match config {
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        None => None,
    };
    let settings: S = resolve_text(config.zip(text.as_deref()).map(|(p, t)| (t, p)), flags)?;
    if print_config {
        use std::io::Write;
        let printed = print_settings(&settings)?;
        match std::io::stdout().lock().write_all(printed.as_bytes()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(e).context("writing to standard output")
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(settings))
}

/// The settings of kind `S` from the config file's text (`(text, path it was read from)`),
/// if any, and `flags`, validated.
pub fn resolve_text<S: Settings, F: Serialize>(
    config: Option<(&str, &Path)>,
    flags: &F,
) -> Result<S> {
    let paths = paths_of::<S>();
    let merged = merged_table(S::defaults(), config, flags, &paths)?;
    let known = || Common::KEYS.iter().chain(S::KEYS);
    if let Some(unknown) = merged.keys().find(|key| !known().any(|k| k == key)) {
        bail!(
            "unknown field `{unknown}`: every setting is a flag (--name) or a line `name = value` \
             in --config, one of: {}",
            known().copied().collect::<Vec<_>>().join(", ")
        );
    }
    let settings: S = from_table(merged)?;
    settings.common().validate()?;
    settings.validate()?;
    Ok(settings)
}

/// `settings` as a config file, paths absolute.
pub fn print_settings<S: Settings>(settings: &S) -> Result<String> {
    print(settings, &paths_of::<S>())
}

fn paths_of<S: Settings>() -> Vec<&'static str> {
    Common::PATHS.iter().chain(S::PATHS).copied().collect()
}

/// Merges `defaults`, the file at `config` (if any) and `flags` (only the flags given), later
/// ones winning, into `S`. `paths` names the fields that hold paths.
pub fn merge<S: Serialize + DeserializeOwned, F: Serialize>(
    defaults: toml::Table,
    config: Option<&Path>,
    flags: &F,
    paths: &[&str],
) -> Result<S> {
    let text = match config {
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        None => None,
    };
    merge_text(
        defaults,
        config.zip(text.as_deref()).map(|(path, text)| (text, path)),
        flags,
        paths,
    )
}

/// [`merge`] with the config file's text given: `(text, path it was read from)`.
pub fn merge_text<S: Serialize + DeserializeOwned, F: Serialize>(
    defaults: toml::Table,
    config: Option<(&str, &Path)>,
    flags: &F,
    paths: &[&str],
) -> Result<S> {
    let merged = merged_table(defaults, config, flags, paths)?;
    let given: Vec<String> = merged.keys().cloned().collect();
    let settings: S = from_table(merged)?;
    // Every key given must have landed in a field: what the settings print back names them all.
    let known = toml::Table::try_from(&settings).context("reading the settings back")?;
    if let Some(unknown) = given.iter().find(|key| !known.contains_key(*key)) {
        bail!(
            "unknown field `{unknown}`: every setting is a flag (--name) or a line `name = value` \
             in --config, one of: {}",
            known.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    Ok(settings)
}

/// `defaults`, then the file (paths made relative to it), then the flags given, as one table.
fn merged_table<F: Serialize>(
    defaults: toml::Table,
    config: Option<(&str, &Path)>,
    flags: &F,
    paths: &[&str],
) -> Result<toml::Table> {
    let mut merged = defaults;
    if let Some((text, path)) = config {
        let mut file: toml::Table =
            toml::from_str(text).with_context(|| format!("{} is not TOML", path.display()))?;
        let base = path.parent().unwrap_or(Path::new(""));
        for field in paths {
            if let Some(value) = file.get_mut(*field) {
                map_paths(value, &|p| base.join(p).to_string_lossy().into_owned());
            }
        }
        merged.extend(file);
    }
    let flags = toml::Table::try_from(flags).context("reading the flags")?;
    merged.extend(flags);
    Ok(merged)
}

/// The settings `merged` holds.
fn from_table<S: DeserializeOwned>(merged: toml::Table) -> Result<S> {
    let settings: std::result::Result<S, _> = toml::Value::Table(merged).try_into();
    settings.map_err(|e| {
        anyhow::anyhow!(
            "{}: every setting is a flag (--name) or a line `name = value` in --config",
            e.to_string().trim()
        )
    })
}

/// `settings` as a config file, with the `paths` fields made absolute.
pub fn print<S: Serialize>(settings: &S, paths: &[&str]) -> Result<String> {
    let mut table = toml::Table::try_from(settings).context("writing the settings")?;
    for field in paths {
        if let Some(value) = table.get_mut(*field) {
            map_paths(value, &|p| {
                std::path::absolute(PathBuf::from(p))
                    .map(|a| a.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| p.to_string())
            });
        }
    }
    toml::to_string(&table).context("writing the settings as TOML")
}

/// Applies `f` to a path setting: a string, or each string of a list.
fn map_paths(value: &mut toml::Value, f: &dyn Fn(&str) -> String) {
    match value {
        toml::Value::String(p) => *p = f(p),
        toml::Value::Array(items) => {
            for item in items {
                if let toml::Value::String(p) = item {
                    *p = f(p);
                }
            }
        }
        _ => {}
    }
}

/// Makes a defaults table from `(name, value)` pairs.
pub fn defaults<const N: usize>(pairs: [(&str, toml::Value); N]) -> toml::Table {
    pairs
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
}

/// `defaults` with the connection bounds every server takes ([`LimitArgs`]) added.
pub fn with_limits(mut defaults: toml::Table) -> toml::Table {
    let bounds = [
        (
            "max_connections",
            pir_server::DEFAULT_MAX_CONNECTIONS as i64,
        ),
        (
            "header_timeout_seconds",
            pir_server::DEFAULT_HEADER_TIMEOUT.as_secs() as i64,
        ),
        (
            "body_timeout_seconds",
            pir_server::DEFAULT_BODY_TIMEOUT.as_secs() as i64,
        ),
        (
            "memory_budget_mib",
            (pir_server::DEFAULT_MEMORY_BUDGET >> 20) as i64,
        ),
    ];
    for (name, value) in bounds {
        defaults.insert(name.to_string(), toml::Value::Integer(value));
    }
    defaults
}

/// The most `memory_budget_mib` accepts: 1 TiB of request bodies held at once.
pub const MAX_MEMORY_BUDGET_MIB: u64 = 1 << 20;

/// Puts resolved connection and memory bounds into `options` (each at least 1; the memory
/// budget at most [`MAX_MEMORY_BUDGET_MIB`]).
pub fn apply_limits(
    options: &mut pir_server::ServerOptions,
    max_connections: usize,
    header_timeout_seconds: u64,
    body_timeout_seconds: u64,
    memory_budget_mib: u64,
) -> Result<()> {
    if max_connections == 0 || header_timeout_seconds == 0 || body_timeout_seconds == 0 {
        bail!(
            "max_connections, header_timeout_seconds and body_timeout_seconds must be at least 1"
        );
    }
    if !(1..=MAX_MEMORY_BUDGET_MIB).contains(&memory_budget_mib) {
        bail!("memory_budget_mib must be between 1 and {MAX_MEMORY_BUDGET_MIB}");
    }
    options.max_connections = max_connections;
    options.header_timeout = Duration::from_secs(header_timeout_seconds);
    options.body_timeout = Duration::from_secs(body_timeout_seconds);
    options.memory_budget = usize::try_from(memory_budget_mib << 20)
        .context("memory_budget_mib does not fit this machine's address space")?;
    Ok(())
}

/// A setting that is one path or a list of them (`db = "a.db"` or `db = ["a.db", "b.db"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One path.
    One(PathBuf),
    /// Several, in order.
    Many(Vec<PathBuf>),
}

impl OneOrMany {
    /// The paths, in order.
    pub fn paths(&self) -> Vec<PathBuf> {
        match self {
            OneOrMany::One(p) => vec![p.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }

    /// How many databases these are, refused when there is none (`none` says how to give one)
    /// or more than one server serves at once ([`pir_service::releases::MAX_RELEASES`]).
    pub fn database_count(&self, none: &str) -> Result<usize> {
        let count = self.paths().len();
        if count == 0 {
            bail!("{none}");
        }
        let most = pir_service::releases::MAX_RELEASES;
        if count > most {
            bail!("{count} databases; one server serves at most {most}");
        }
        Ok(count)
    }
}

/// `--config FILE` and `--print-config`, the first two flags of every server command, which
/// flattens this struct and skips it when serializing its flags (`#[serde(skip)]`). The help
/// of `--config` lists the kind's own keys, so each command sets it on its flags struct:
/// `#[command(mut_arg("config", |arg| arg.help("TOML file with any of: ...")))]`.
#[derive(Debug, Default, Clone, clap::Args)]
pub struct ConfigArgs {
    /// TOML file with any of the settings (the flag names with `_`); flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective settings (file and flags merged, defaults filled in) as a config
    /// file, and exit without serving.
    #[arg(long)]
    pub print_config: bool,
}

impl ConfigArgs {
    /// [`load`]: the settings of kind `S` from the file named by `--config` and `flags`, or
    /// `None` once printed (`--print-config`).
    pub fn load<S: Settings, F: Serialize>(&self, flags: &F) -> Result<Option<S>> {
        load(self.config.as_deref(), flags, self.print_config)
    }
}

/// Connection bounds every server takes (flags; the same names work in --config files).
#[derive(Debug, Default, Clone, clap::Args, Serialize)]
pub struct LimitArgs {
    /// Most connections open at once (default 4096); more wait in the kernel's backlog until
    /// one closes.
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<usize>,
    /// Seconds a client may take to send a request's headers; an idle keep-alive connection
    /// is closed after the same time (default 30).
    #[arg(long, value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_timeout_seconds: Option<u64>,
    /// Seconds a client may take to send a request's body once its headers are in
    /// (default 30).
    #[arg(long, value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_timeout_seconds: Option<u64>,
    /// MiB of request bodies held in memory at once, over all connections (default 256,
    /// never below the largest valid body); a body that does not fit waits, then gets 503.
    #[arg(long, value_name = "MIB")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_budget_mib: Option<u64>,
}

/// The flags every server takes ([`Common`] once resolved), flattened into each kind's flags.
#[derive(Debug, Default, Clone, clap::Args, Serialize)]
pub struct CommonArgs {
    /// The server's secret key (from `pir keygen`): TLS identity and answer signatures.
    #[arg(long, value_name = "SERVER.key")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    /// HTTPS address to listen on.
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Also serve /metrics and /health over plain HTTP at ADDR (for a scraper on this host;
    /// use a loopback address such as 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_listen: Option<SocketAddr>,
    /// Threads that answer queries, scanning the database together (default: number of
    /// cores).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Queries arriving within this many ms of the first waiting one share one pass over the
    /// database (default 2; 0 batches only what is already queued).
    #[arg(long, value_name = "MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_window_ms: Option<u64>,
    /// Most requests answered in one pass (default 64).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<usize>,
    /// On SIGTERM or Ctrl-C, stop accepting and let requests in flight finish for up to this
    /// many seconds before closing their connections (default 10).
    #[arg(long, value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_seconds: Option<u64>,
    /// After a reload (SIGHUP), keep serving what the new version dropped for this many
    /// seconds, so requests in progress finish (default 60; 600 for `pir mirror serve`).
    #[arg(long, value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retire_seconds: Option<u64>,
    // Documented flag by flag in `LimitArgs` (a doc comment here would be clap's help text).
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(flatten)]
    pub limits: LimitArgs,
}

/// The settings every server shares, after defaults, file and flags are merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Common {
    /// The server's secret key file.
    pub key: PathBuf,
    /// HTTPS address.
    pub listen: SocketAddr,
    /// Plain-HTTP address for /metrics and /health, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_listen: Option<SocketAddr>,
    /// Answering threads (default: cores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Batching window, ms.
    pub batch_window_ms: u64,
    /// Most requests per pass.
    pub max_batch: usize,
    /// Drain time on SIGTERM / Ctrl-C, seconds.
    pub grace_seconds: u64,
    /// How long a version a reload dropped is still served, seconds.
    pub retire_seconds: u64,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Time for a request's headers (and idle keep-alive time), seconds.
    pub header_timeout_seconds: u64,
    /// Time for a request's body, seconds.
    pub body_timeout_seconds: u64,
    /// Request bodies held at once, MiB.
    pub memory_budget_mib: u64,
}

/// Default [`Common::retire_seconds`] of servers whose requests are short (single lookups).
pub const DEFAULT_RETIRE_SECONDS: u64 = 60;

impl Common {
    /// The common keys.
    pub const KEYS: &'static [&'static str] = &[
        "key",
        "listen",
        "admin_listen",
        "workers",
        "batch_window_ms",
        "max_batch",
        "grace_seconds",
        "retire_seconds",
        "max_connections",
        "header_timeout_seconds",
        "body_timeout_seconds",
        "memory_budget_mib",
    ];

    /// The common fields that hold paths.
    pub const PATHS: &'static [&'static str] = &["key"];

    /// The common defaults (the runtime's), with `retire_seconds` as given.
    pub fn defaults(retire_seconds: u64) -> toml::Table {
        with_limits(defaults([
            (
                "batch_window_ms",
                toml::Value::Integer(pir_server::DEFAULT_BATCH_WINDOW.as_millis() as i64),
            ),
            (
                "max_batch",
                toml::Value::Integer(pir_server::DEFAULT_MAX_BATCH as i64),
            ),
            (
                "grace_seconds",
                toml::Value::Integer(pir_server::DEFAULT_GRACE.as_secs() as i64),
            ),
            (
                "retire_seconds",
                toml::Value::Integer(retire_seconds as i64),
            ),
        ]))
    }

    /// Checks the ranges serde cannot.
    pub fn validate(&self) -> Result<()> {
        if self.workers == Some(0) {
            bail!("workers must be at least 1");
        }
        if self.max_batch == 0 {
            bail!("max_batch must be at least 1");
        }
        if self.batch_window_ms > 1000 {
            bail!("batch_window_ms must be at most 1000");
        }
        if !(1..=MAX_MEMORY_BUDGET_MIB).contains(&self.memory_budget_mib) {
            bail!("memory_budget_mib must be between 1 and {MAX_MEMORY_BUDGET_MIB}");
        }
        if self.max_connections == 0
            || self.header_timeout_seconds == 0
            || self.body_timeout_seconds == 0
        {
            bail!(
                "max_connections, header_timeout_seconds and body_timeout_seconds must be at \
                 least 1"
            );
        }
        Ok(())
    }

    /// The runtime's options these settings give.
    pub fn options(&self) -> Result<pir_server::ServerOptions> {
        self.validate()?;
        let mut options = pir_server::ServerOptions::new(self.listen);
        options.admin_listen = self.admin_listen;
        if let Some(workers) = self.workers {
            options.workers = workers;
        }
        options.batch_window = Duration::from_millis(self.batch_window_ms);
        options.max_batch = self.max_batch;
        options.grace = Duration::from_secs(self.grace_seconds);
        apply_limits(
            &mut options,
            self.max_connections,
            self.header_timeout_seconds,
            self.body_timeout_seconds,
            self.memory_budget_mib,
        )?;
        Ok(options)
    }

    /// How long a version a reload dropped is still served.
    pub fn retire_after(&self) -> Duration {
        Duration::from_secs(self.retire_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct Kind {
        db: OneOrMany,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blinding_key: Option<PathBuf>,
        #[serde(flatten)]
        common: Common,
    }

    impl Settings for Kind {
        const KEYS: &'static [&'static str] = &["db", "blinding_key"];
        const PATHS: &'static [&'static str] = &["db", "blinding_key"];
        fn defaults() -> toml::Table {
            Common::defaults(DEFAULT_RETIRE_SECONDS)
        }
        fn validate(&self) -> Result<()> {
            if self.db.paths().is_empty() {
                bail!("no db");
            }
            Ok(())
        }
        fn common(&self) -> &Common {
            &self.common
        }
    }

    #[derive(Serialize, Default)]
    struct Flags {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        db: Vec<PathBuf>,
        #[serde(flatten)]
        common: CommonArgs,
    }

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn resolve(path: &Path, flags: &Flags) -> Result<Kind> {
        let text = std::fs::read_to_string(path).unwrap();
        resolve_text(Some((&text, path)), flags)
    }

    #[test]
    fn defaults_then_file_then_flags() {
        let (dir, path) = file(
            "db = \"a.db\"\nkey = \"k.key\"\nlisten = \"127.0.0.1:1\"\nworkers = 3\n\
             grace_seconds = 5\n",
        );
        let s = resolve(&path, &Flags::default()).unwrap();
        assert_eq!(
            s.db,
            OneOrMany::One(dir.path().join("a.db")),
            "relative to the file"
        );
        assert_eq!(s.common.key, dir.path().join("k.key"));
        assert_eq!((s.common.workers, s.common.grace_seconds), (Some(3), 5));
        assert_eq!(
            s.common.max_batch,
            pir_server::DEFAULT_MAX_BATCH,
            "a default"
        );
        let mut flags = Flags {
            db: vec!["b.db".into(), "c.db".into()],
            ..Flags::default()
        };
        flags.common.grace_seconds = Some(1);
        flags.common.limits.max_connections = Some(9);
        let s = resolve(&path, &flags).unwrap();
        assert_eq!(s.db.paths(), [PathBuf::from("b.db"), PathBuf::from("c.db")]);
        assert_eq!((s.common.grace_seconds, s.common.max_connections), (1, 9));
        let options = s.common.options().unwrap();
        assert_eq!(options.workers, 3);
        assert_eq!(options.max_connections, 9);
    }

    #[test]
    fn the_memory_budget_is_a_setting() {
        let (_dir, path) = file("db = \"a\"\nkey = \"k\"\nlisten = \"127.0.0.1:1\"\n");
        let s = resolve(&path, &Flags::default()).unwrap();
        assert_eq!(
            s.common.options().unwrap().memory_budget,
            pir_server::DEFAULT_MEMORY_BUDGET,
            "the runtime's default"
        );
        let (_dir, path) =
            file("db = \"a\"\nkey = \"k\"\nlisten = \"127.0.0.1:1\"\nmemory_budget_mib = 64\n");
        let s = resolve(&path, &Flags::default()).unwrap();
        assert_eq!(s.common.options().unwrap().memory_budget, 64 << 20);
        let mut flags = Flags::default();
        flags.common.limits.memory_budget_mib = Some(0);
        let e = resolve(&path, &flags).unwrap_err().to_string();
        assert!(e.contains("memory_budget_mib"), "{e}");
    }

    #[test]
    fn unknown_and_missing_settings_are_named() {
        let (_dir, path) =
            file("db = \"a.db\"\nkey = \"k\"\nlisten = \"127.0.0.1:1\"\nbogus = 1\n");
        let e = resolve(&path, &Flags::default()).unwrap_err().to_string();
        assert!(e.contains("unknown field `bogus`"), "{e}");
        let (_dir, path) = file("key = \"k\"\nlisten = \"127.0.0.1:1\"\nbogus = 1\n");
        let e = resolve(&path, &Flags::default()).unwrap_err().to_string();
        assert!(
            e.contains("unknown field `bogus`"),
            "before a missing one: {e}"
        );
        let (_dir, path) = file("key = \"k\"\nlisten = \"127.0.0.1:1\"\n");
        let e = resolve(&path, &Flags::default()).unwrap_err().to_string();
        assert!(e.contains("db"), "{e}");
        let (_dir, path) = file("db = \"a\"\nlisten = \"127.0.0.1:1\"\n");
        let e = resolve(&path, &Flags::default()).unwrap_err().to_string();
        assert!(e.contains("key"), "{e}");
        let (_dir, path) = file("db = []\nkey = \"k\"\nlisten = \"127.0.0.1:1\"\n");
        assert!(
            resolve(&path, &Flags::default()).is_err(),
            "the kind's check runs"
        );
        let (_dir, path) =
            file("db = \"a\"\nkey = \"k\"\nlisten = \"127.0.0.1:1\"\nmax_batch = 0\n");
        let e = resolve(&path, &Flags::default()).unwrap_err().to_string();
        assert!(e.contains("max_batch"), "the common check runs: {e}");
    }

    #[test]
    fn the_common_keys_are_the_fields() {
        let (_dir, path) = file(
            "db = \"a\"\nkey = \"k\"\nlisten = \"127.0.0.1:1\"\nworkers = 2\n\
             admin_listen = \"127.0.0.1:2\"\n",
        );
        let s = resolve(&path, &Flags::default()).unwrap();
        let table = toml::Table::try_from(&s.common).unwrap();
        let mut printed: Vec<&str> = table.keys().map(String::as_str).collect();
        let mut declared = Common::KEYS.to_vec();
        printed.sort_unstable();
        declared.sort_unstable();
        assert_eq!(printed, declared);
    }

    #[test]
    fn printed_settings_read_back_the_same() {
        let (_dir, path) = file(
            "db = [\"a.db\", \"b.db\"]\nkey = \"k.key\"\nlisten = \"127.0.0.1:1\"\n\
             blinding_key = \"x.key\"\n",
        );
        let s = resolve(&path, &Flags::default()).unwrap();
        let printed = print_settings(&s).unwrap();
        assert!(printed.contains("retire_seconds = 60"), "{printed}");
        assert!(
            !printed.contains("\"x.key\""),
            "paths are absolute: {printed}"
        );
        let (_other, elsewhere) = file(&printed);
        let again = resolve(&elsewhere, &Flags::default()).unwrap();
        assert_eq!(again, s);
        assert_eq!(print_settings(&again).unwrap(), printed);
    }

    #[test]
    fn a_server_serves_one_to_max_releases_databases() {
        let paths =
            |n: usize| OneOrMany::Many((0..n).map(|k| PathBuf::from(format!("{k}.db"))).collect());
        let none = paths(0).database_count("pass --db").unwrap_err();
        assert_eq!(none.to_string(), "pass --db");
        assert_eq!(OneOrMany::One("a.db".into()).database_count("").unwrap(), 1);
        let most = pir_service::releases::MAX_RELEASES;
        assert_eq!(paths(most).database_count("").unwrap(), most);
        let over = paths(most + 1).database_count("").unwrap_err().to_string();
        assert!(over.contains("one server serves at most"), "{over}");
    }
}
