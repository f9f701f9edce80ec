//! The settings of `pir oram store`, resolved from flags and a config file as the command
//! does (no binary): a store always answers on one worker with no batching window, so
//! `workers` and `batch_window_ms` are refused, whether given as flags or in the file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::path::Path;

use clap::Parser;
use pir_blockstore::command::{OramStoreArgs, OramStoreSettings};
use pir_host::settings;

/// `pir oram store`'s flags, alone.
#[derive(Parser)]
struct Store {
    #[command(flatten)]
    args: OramStoreArgs,
}

const BASE: [&str; 6] = [
    "--dir",
    "/srv/slots",
    "--owner",
    "/etc/pir/client.pub",
    "--key",
    "/etc/pir/store.key",
];

fn resolve(extra: &[&str], file: Option<&str>) -> anyhow::Result<OramStoreSettings> {
    let argv = ["store"].iter().chain(BASE.iter()).chain(extra.iter());
    let flags = Store::try_parse_from(argv).unwrap();
    settings::resolve_text(
        file.map(|text| (text, Path::new("/etc/pir/store.toml"))),
        &flags.args,
    )
}

#[test]
fn workers_and_batch_window_are_refused_not_overridden() {
    for (flags, file) in [
        (&["--workers", "4"][..], None),
        (&["--batch-window-ms", "5"][..], None),
        (&[][..], Some("workers = 2\n")),
        (&[][..], Some("batch_window_ms = 3\n")),
    ] {
        let refused = resolve(flags, file).unwrap_err().to_string();
        assert!(
            refused.contains("--workers") && refused.contains("--batch-window-ms"),
            "{flags:?} {file:?}: {refused}"
        );
        assert!(refused.contains("one worker"), "{refused}");
    }
}

#[test]
fn the_printed_settings_say_what_the_store_runs_with() {
    let accepted = resolve(&["--max-batch", "8"], None).unwrap();
    assert_eq!(accepted.common.workers, None);
    assert_eq!(accepted.common.batch_window_ms, 0);
    assert_eq!(accepted.common.max_batch, 8);
    assert_eq!(accepted.dir, Path::new("/srv/slots"));
    let printed = settings::print_settings(&accepted).unwrap();
    assert!(printed.contains("batch_window_ms = 0"), "{printed}");
    assert!(!printed.contains("workers"), "{printed}");
    // What --print-config wrote reads back, as a config file, to the same settings.
    let again: OramStoreSettings = settings::resolve_text(
        Some((&printed, Path::new("/elsewhere/printed.toml"))),
        &toml::Table::new(),
    )
    .unwrap();
    assert_eq!(settings::print_settings(&again).unwrap(), printed);
}
