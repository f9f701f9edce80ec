//! Turning errors into messages and exit codes.
//!
//! Exit codes: 0 success; 1 failure; 2 bad command line (clap); 3 a mirror failed or
//! cheated and the fetch could not complete (evidence files, if any, are named); 4 `pir get
//! --key`: the key is not in the database; 5 `pir breach check`: the credential IS in the
//! breach corpus (0 there means not found; `pir_breach::command::CREDENTIAL_FOUND`); 6 `pir
//! evidence check`: the evidence PROVES the mirror cheated; 7 `pir evidence check`: the answer
//! is not signed by the mirror's key, so it proves nothing (0 there means every answer is
//! correct; 1 also when the local release copy fails its own check). 5, 6 and 7 are returned
//! by the applications' `command` modules themselves.

use std::process::ExitCode;

use pir_records::command::KeyNotFound;
use pir_updates::UpdateError;

/// The top message of `error`, then each cause that no message before it already says.
/// Many errors quote their cause (`"{path}: {source}"`) and also return it as their source,
/// so the same words would otherwise be printed at two or three levels.
fn messages(error: &anyhow::Error) -> Vec<String> {
    let mut said: Vec<String> = Vec::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if !said.iter().any(|before| before.contains(&cause)) {
            said.push(cause);
        }
    }
    said
}

/// Prints `error` with its causes (one JSON object with `--log-format json`) and returns the
/// exit code.
pub fn report(error: &anyhow::Error) -> ExitCode {
    let mut messages = messages(error).into_iter();
    let top = messages.next().unwrap_or_default();
    let mut details: Vec<String> = messages
        .map(|cause| format!("caused by: {cause}"))
        .collect();
    let code = exit_code(error, &mut details);
    pir_host::log::failure(&top, &details);
    code
}

/// The exit code for `error`; adds the lines that say where evidence was kept.
fn exit_code(error: &anyhow::Error, details: &mut Vec<String>) -> ExitCode {
    if error.downcast_ref::<KeyNotFound>().is_some() {
        return ExitCode::from(KeyNotFound::EXIT_CODE);
    }
    match error.downcast_ref::<UpdateError>() {
        Some(UpdateError::FetchFailed { evidence, .. }) => {
            for path in evidence {
                details.push(format!(
                    "evidence kept: {} (check it with `pir evidence check`)",
                    path.display()
                ));
            }
            if evidence.len() > 1 {
                details.push(
                    "note: each evidence file alone reveals nothing about what you fetched, but \
                     these files together do; never hand all of them to the same party"
                        .to_string(),
                );
            }
            ExitCode::from(3)
        }
        _ => ExitCode::from(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{path}: {source}")]
    struct AtPath {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device");
        let error = anyhow::Error::new(AtPath {
            path: "/tmp/x".into(),
            source: io,
        })
        .context("writing the mirror list");
        // The I/O error is quoted by the error above it: said once, not twice.
        assert_eq!(
            messages(&error),
            vec![
                "writing the mirror list".to_string(),
                "/tmp/x: No space left on device".to_string(),
            ]
        );
        let plain = anyhow::anyhow!("bad").context("outer");
        assert_eq!(
            messages(&plain),
            vec!["outer".to_string(), "bad".to_string()]
        );
    }
}
