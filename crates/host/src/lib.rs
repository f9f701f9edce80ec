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
//! What it does not do: answer queries (the `pir-service` backends do), move bytes (the
//! `pir-server` runtime does), or know any application.

pub mod log;
pub mod serve;
pub mod settings;

pub use serve::{serve, serve_static, Change, Host, Kind, Opening, Started};
pub use settings::{Common, CommonArgs, LimitArgs, OneOrMany, Settings};

/// `tracing`, for [`status!`] in crates that do not depend on it.
#[doc(hidden)]
pub use tracing as __tracing;
