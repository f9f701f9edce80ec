//! The security levels `pir_lattice::security` states are what `benches/security_estimate.py`
//! computes for the parameters the code runs with, and `docs/security.md`'s table is that
//! script's output: none of the three can change without the others.
//!
//! Needs `python3` (standard library only). In CI (`CI=true`) a missing `python3` fails the
//! test; elsewhere it is skipped with a message.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::path::Path;
use std::process::Command;

use pir_lattice::security::{self, ParamSet};
use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The script's `--json` report, or `None` (skip) where python3 is missing outside CI.
fn estimate() -> Option<Value> {
    if Command::new("python3").arg("--version").output().is_err() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "python3 is missing in CI: apt-get install python3"
        );
        eprintln!("skipped: python3 is missing (apt-get install python3)");
        return None;
    }
    let out = Command::new("python3")
        .arg(repo().join("benches/security_estimate.py"))
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn check_set(code: &ParamSet, script: &Value) {
    let name = code.name;
    assert_eq!(script["name"], name);
    assert_eq!(
        script["dimension"], code.dimension as u64,
        "{name}: dimension"
    );
    let log_q = script["log2_q"].as_f64().unwrap();
    assert!(
        (log_q - code.modulus.log2()).abs() < 1e-9,
        "{name}: log2 q {log_q} in the script, {} in the code",
        code.modulus.log2()
    );
    assert_eq!(script["sigma"].as_f64(), Some(code.sigma), "{name}: sigma");
    assert_eq!(script["secret"], code.secret.name(), "{name}: secret");
    assert_eq!(script["samples"].as_u64(), code.samples, "{name}: samples");
    let bits = |key: &str| script[key].as_u64().unwrap();
    assert_eq!(
        (bits("classical"), bits("quantum"), bits("estimator")),
        (
            u64::from(code.classical),
            u64::from(code.quantum),
            u64::from(code.estimator)
        ),
        "{name}: the stated level differs from the estimate (classical, quantum, estimator)"
    );
}

#[test]
fn stated_levels_are_the_script_estimates_of_the_code_parameters() {
    let Some(report) = estimate() else { return };
    let sets = report["sets"].as_array().unwrap();
    assert_eq!(
        sets.len(),
        security::SETS.len(),
        "one estimate per parameter set"
    );
    for (code, script) in security::SETS.iter().zip(sets) {
        check_set(code, script);
    }

    // docs/security.md shows the script's table, line for line.
    let doc = std::fs::read_to_string(repo().join("docs/security.md")).unwrap();
    for line in report["table"].as_array().unwrap() {
        let line = line.as_str().unwrap();
        assert!(
            doc.lines().any(|l| l == line),
            "docs/security.md lacks the script's line (rerun \
             `python3 benches/security_estimate.py` and paste its table):\n{line}"
        );
    }
}
