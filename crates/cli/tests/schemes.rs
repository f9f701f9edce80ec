//! `pir --help` and `pir schemes` print the scheme registry: every scheme, with its privacy
//! assumption.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::process::Command;

use pir_service::registry;

fn pir(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pir"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "pir {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `text` with its whitespace runs made single spaces (clap may rewrap long lines).
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn help_lists_every_scheme_and_its_assumption() {
    let help = words(&pir(&["--help"]));
    for entry in registry::standard() {
        assert!(help.contains(&format!("{} (", entry.name)), "{help}");
        assert!(
            help.contains(&words(entry.assumption)),
            "{}: {help}",
            entry.name
        );
    }
    for name in ["DPF", "QDP", "Checklist", "YPIR+SP", "Oblivious storage"] {
        assert!(help.contains(name), "{name} missing from pir --help");
    }
}

#[test]
fn schemes_prints_the_registry() {
    let text = pir(&["schemes"]);
    assert_eq!(text, registry::text());
    let flat = words(&text);
    for entry in registry::standard() {
        for field in [entry.purpose, entry.assumption, entry.family.name()] {
            assert!(flat.contains(&words(field)), "{}: {field}", entry.name);
        }
        assert!(flat.contains(&format!("servers: {}", entry.servers)));
    }
    assert_eq!(pir(&["schemes", "--markdown"]), registry::markdown());
}
