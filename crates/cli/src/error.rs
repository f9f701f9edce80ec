//! Turning errors into messages and exit codes.
//!
//! Exit codes: 0 success; 1 failure; 2 bad command line (clap); 3 a mirror failed or
//! cheated and the fetch could not complete (evidence files, if any, are named); 4 `pir get
//! --key`: the key is not in the database; 5 `pir breach check`: the credential IS in the
//! breach corpus (0 there means not found); 6 `pir evidence check`: the evidence PROVES the
//! mirror cheated; 7 `pir evidence check`: the answer is not signed by the mirror's key, so it
//! proves nothing (0 there means every answer is correct; 1 also when the local release copy
//! fails its own check).

use std::process::ExitCode;

use pir_updates::UpdateError;

/// Exit code of `pir breach check` when the credential was found in the corpus.
pub const CREDENTIAL_FOUND: u8 = 5;

/// Exit code of `pir evidence check` when the mirror's signed answer is wrong: proof.
pub const EVIDENCE_CHEATED: u8 = 6;

/// Exit code of `pir evidence check` when the reply is not signed by the mirror's key.
pub const EVIDENCE_NOT_SIGNED: u8 = 7;

/// `pir get --lookup` found neither candidate slot holding the key.
#[derive(Debug, thiserror::Error)]
#[error("not found: key {0:?} is not in the database")]
pub struct KeyNotFound(pub String);

/// Prints `error` with its causes and returns the exit code.
pub fn report(error: &anyhow::Error) -> ExitCode {
    let top = error.to_string();
    eprintln!("error: {top}");
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        // Many errors already quote their cause; do not print it twice.
        if !top.contains(&cause) {
            eprintln!("  caused by: {cause}");
        }
    }
    if error.downcast_ref::<KeyNotFound>().is_some() {
        return ExitCode::from(4);
    }
    match error.downcast_ref::<UpdateError>() {
        Some(UpdateError::FetchFailed { evidence, .. }) => {
            for path in evidence {
                eprintln!(
                    "  evidence kept: {} (check it with `pir evidence check`)",
                    path.display()
                );
            }
            if evidence.len() > 1 {
                eprintln!(
                    "  note: each evidence file alone reveals nothing about what you fetched, but these \
                     files together do; never hand all of them to the same party"
                );
            }
            ExitCode::from(3)
        }
        _ => ExitCode::from(1),
    }
}
