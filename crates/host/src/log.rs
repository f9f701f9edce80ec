//! The one place `pir` sets up logging: diagnostics, status lines and progress bars on
//! standard error.
//!
//! - Diagnostics are `tracing` events, filtered by `--log` (default `warn`).
//! - Status lines ("opening ...", "hint ready in ...") are `tracing` events of the target
//!   [`STATUS`] at level info, written with the [`status!`](crate::status) macro. They are
//!   shown whatever `--log` says (unless it names the target, e.g. `--log warn,pir::status=off`).
//! - Progress bars ([`progress`]) are drawn only in plain mode, on a terminal.
//!
//! In plain mode ([`Format::Plain`]) a status line is its message alone, as a person reads it;
//! other events carry time, level and target. With [`Format::Json`] every line on standard
//! error is one JSON object (status lines included, with `"target":"pir::status"`), and no
//! progress bar is drawn, so a log collector reading standard error never sees anything else.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// The target of status lines.
pub const STATUS: &str = "pir::status";

/// How standard error is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Lines for people; ANSI colours only when standard error is a terminal.
    Plain,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Whether [`init`] chose JSON: progress bars are then never drawn.
static JSON: AtomicBool = AtomicBool::new(false);

/// Sets up logging for the process: `level` is an `EnvFilter` directive such as `warn` or
/// `info,pir_server=debug` (an invalid one falls back to `warn`). Call it once, first thing.
pub fn init(level: &str, format: Format) {
    JSON.store(format == Format::Json, Ordering::Relaxed);
    let directives = if level.contains(STATUS) {
        level.to_string()
    } else {
        format!("{level},{STATUS}=info")
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(format!("warn,{STATUS}=info")))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let registry = tracing_subscriber::registry().with(filter);
    let result = match format {
        Format::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr),
            )
            .try_init(),
        Format::Plain => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let is_status = |meta: &tracing::Metadata<'_>| meta.target() == STATUS;
            let status = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .without_time()
                .with_level(false)
                .with_target(false)
                .with_ansi(false)
                .with_filter(tracing_subscriber::filter::filter_fn(is_status));
            let events = tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(ansi)
                .with_filter(tracing_subscriber::filter::filter_fn(move |meta| {
                    !is_status(meta)
                }));
            registry.with(status).with(events).try_init()
        }
    };
    // A second call (tests that start several servers in one process) keeps the first set-up.
    drop(result);
}

/// Whether logging was set up for JSON.
pub fn is_json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Writes why the command failed, last thing before it exits: `top` then each line of
/// `details` ("caused by: ...", notes). Plain: `error: TOP` and the details indented below it.
/// JSON: one object at level error, target [`FAILURE`], the details in its `details` field,
/// so that even a failed start leaves nothing but JSON on standard error.
pub fn failure(top: &str, details: &[String]) {
    if is_json() {
        tracing::error!(target: FAILURE, details = %details.join("; "), "{top}");
    } else {
        eprintln!("error: {top}");
        for line in details {
            eprintln!("  {line}");
        }
    }
}

/// The target of the event [`failure`] writes in JSON mode.
pub const FAILURE: &str = "pir::error";

/// Writes a status line (see the module documentation): `status!("opening {}", dir)`.
#[macro_export]
macro_rules! status {
    ($($arg:tt)*) => {
        $crate::__tracing::info!(target: $crate::log::STATUS, $($arg)*)
    };
}

/// A progress bar of `total` steps drawn as `template` (indicatif's syntax, e.g.
/// `"hint {bar:40} {percent}% {eta} left"`), or a hidden one: with `quiet`, in JSON mode, or
/// when standard error is not a terminal.
pub fn progress(template: &str, total: u64, quiet: bool) -> indicatif::ProgressBar {
    if quiet || is_json() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// A byte count for people: B, KiB, MiB or GiB.
pub fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / 1048576.0)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_read_well() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(2048), "2.0 KiB");
        assert_eq!(human(3 << 20), "3.0 MiB");
        assert_eq!(human(5 << 30), "5.00 GiB");
    }

    #[test]
    fn bars_are_hidden_when_quiet() {
        assert!(progress("{bar}", 10, true).is_hidden());
    }
}
