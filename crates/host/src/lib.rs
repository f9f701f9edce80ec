//! `pir-host`: the one server life cycle every `pir` server runs.
//!
//! - [`settings`]: built-in defaults, then a TOML file (`--config`), then the flags given,
//!   merged into one validated settings struct per server kind, with the part every server
//!   shares ([`settings::Common`]: key, listen, admin_listen, workers, batch_window_ms,
//!   max_batch, grace_seconds, retire_seconds, connection bounds) flattened into it;
//!   `--print-config` prints the result as a file that reads back the same.
//! - [`serve`]: key and pinned TLS, runtime options, database versions opened
//!   ([`serve::Kind`]), the HTTPS runtime (`pir-server`), start-up lines, SIGHUP reload with
//!   retirement of the versions it dropped, SIGTERM / Ctrl-C drain, the admin listener. A
//!   server without versions (one fixed handler) uses [`serve::serve_static`].
//! - [`log`]: the one place logging is set up; status lines ([`status!`]) and progress bars
//!   go through it, so `--log-format json` makes every line on standard error a JSON object.
//!
//! A server kind is a declaration on this crate: its settings struct ([`settings::Settings`]),
//! its backend and how it opens its database versions ([`serve::Kind`]).
//!
//! # For operators
//!
//! Every server command (`pir mirror serve`, `pir serve`, `pir breach serve`, `pir
//! safebrowsing serve`) takes these settings as flags (`--grace-seconds 30`) or as lines of
//! its `--config` file (`grace_seconds = 30`), flags winning over the file and the file over
//! the defaults; `--print-config` prints the merged result as a file that reads back the same:
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `key` | (required) | the server's secret key: TLS identity and answer signatures |
//! | `listen` | (required) | HTTPS address |
//! | `admin_listen` | none | plain-HTTP `/metrics` and `/health` (keep it on loopback) |
//! | `workers` | cores | answering threads |
//! | `batch_window_ms` | 2 | queries within this window share one pass (at most 1000) |
//! | `max_batch` | 64 | most requests per pass |
//! | `grace_seconds` | 10 | drain time on SIGTERM / Ctrl-C |
//! | `retire_seconds` | 60 (mirror: 600) | how long a version a reload dropped is still served |
//! | `max_connections` | 4096 | connections open at once |
//! | `header_timeout_seconds` | 30 | time for a request's headers (and idle keep-alive) |
//! | `body_timeout_seconds` | 30 | time for a request's body |
//! | `memory_budget_mib` | 256 | MiB of request bodies held at once, over all connections |
//!
//! Signals: SIGHUP opens the databases again (what is already served is reused; what the new
//! version dropped is retired, then dropped after `retire_seconds`; a failed reload changes
//! nothing); SIGTERM and SIGINT drain requests in flight for `grace_seconds`, then stop.
//!
//! Standard output carries the start-up lines (addresses, key fingerprint, what is served)
//! and one line per reload. Standard error carries the log: `--log LEVEL` filters diagnostics
//! (default `warn`); status lines (target `pir::status`) are always shown unless the filter
//! names that target (`--log warn,pir::status=off`). `--log-format json` makes every line on
//! standard error one JSON object (`{"timestamp":..,"level":..,"fields":{"message":..},
//! "target":..}`) and turns progress bars off.
//!
//! What it does not do: answer queries (the `pir-service` backends do), move bytes (the
//! `pir-server` runtime does), or know any application.

pub mod log;
pub mod serve;
pub mod settings;

pub use serve::{
    serve, serve_command, serve_static, Change, Host, Kind, Opening, Started, Versions,
};
pub use settings::{Common, CommonArgs, ConfigArgs, LimitArgs, OneOrMany, Settings};

/// `tracing`, for [`status!`] in crates that do not depend on it.
#[doc(hidden)]
pub use tracing as __tracing;
