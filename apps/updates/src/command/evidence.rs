//! `pir evidence check`: judges a mirror's signed answers (kept by `pir fetch`) against the
//! local copy of the release.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use pir_client::{Evidence, Verdict};

use super::{EVIDENCE_CHEATED, EVIDENCE_NOT_SIGNED};
use crate::release;

/// `pir evidence ...`.
#[derive(Debug, Subcommand)]
pub enum EvidenceCommand {
    /// Recompute the answers in an evidence file from the release and say whether the mirror cheated.
    ///
    /// The local release is checked first (every block against the signed manifest): a
    /// corrupt copy would make an honest mirror look guilty.
    ///
    /// Exit codes: 0 every answer the mirror signed is correct; 6 CHEATED: the mirror signed a
    /// wrong answer (the file is proof, for anyone holding the release); 7 the reply is not
    /// signed by the mirror's key (proves nothing about it); 1 the file or the local release
    /// is unusable.
    #[command(verbatim_doc_comment)]
    Check(EvidenceCheckArgs),
    /// Hand an evidence file to the vendor service, which checks it as `check` does and, on
    /// proof, drops the mirror from its list at once. Exit codes as `check`'s.
    Submit(super::EvidenceSubmitArgs),
}

/// `pir evidence check`.
#[derive(Debug, Args)]
pub struct EvidenceCheckArgs {
    /// The evidence file written by `pir fetch`.
    pub evidence: PathBuf,
    /// The release the answers should have come from.
    #[arg(long, value_name = "RELEASE")]
    pub release: PathBuf,
}

/// `pir evidence check`: verifies the local release copy (every block against the signed
/// manifest), then recomputes the mirror's answers from it, prints the verdict and returns
/// its exit code.
pub(super) fn check(path: &Path, release_dir: &Path) -> Result<ExitCode> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let evidence = Evidence::decode(&bytes)
        .with_context(|| format!("{} is not an evidence file", path.display()))?;
    // A corrupt local copy would make an honest mirror look guilty: check it first.
    let release = release::open(release_dir, None, true).with_context(|| {
        format!(
            "the local release {} cannot be trusted, so the evidence cannot be judged",
            release_dir.display()
        )
    })?;
    if evidence.release_id != release.release_id {
        bail!(
            "the evidence is for release {}, not {}: check it against that release",
            hex::encode(&evidence.release_id[..8]),
            hex::encode(&release.release_id[..8])
        );
    }
    let verdict = pir_client::evidence::check(&evidence, &release.database)?;
    let (line, code) = judgement(&evidence, verdict);
    println!("{line}");
    Ok(ExitCode::from(code))
}

/// What `verdict` on `evidence` means, in words, and the exit code that says it.
pub fn judgement(evidence: &Evidence, verdict: Verdict) -> (String, u8) {
    match verdict {
        Verdict::Cheated { query } => (
            format!(
                "CHEATED: mirror {} (key {}) signed a wrong answer to query {query} of the batch",
                evidence.url,
                evidence.key.fingerprint()
            ),
            EVIDENCE_CHEATED,
        ),
        Verdict::Correct => (
            format!(
                "correct: every answer mirror {} signed is right",
                evidence.url
            ),
            0,
        ),
        Verdict::NotSigned => (
            format!(
                "not signed by mirror {}'s key: proves nothing about it",
                evidence.url
            ),
            EVIDENCE_NOT_SIGNED,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::other_key;

    #[test]
    fn each_verdict_has_its_words_and_exit_code() {
        let key = other_key().public();
        let evidence = Evidence {
            url: "https://m1:443".into(),
            key,
            release_id: [0; 32],
            request: Vec::new(),
            reply: Vec::new(),
        };
        let (line, code) = judgement(&evidence, Verdict::Cheated { query: 2 });
        assert_eq!(
            line,
            format!(
                "CHEATED: mirror https://m1:443 (key {}) signed a wrong answer to query 2 of the batch",
                key.fingerprint()
            )
        );
        assert_eq!(code, 6);
        let (line, code) = judgement(&evidence, Verdict::Correct);
        assert_eq!(
            line,
            "correct: every answer mirror https://m1:443 signed is right"
        );
        assert_eq!(code, 0);
        let (line, code) = judgement(&evidence, Verdict::NotSigned);
        assert!(line.starts_with("not signed by mirror https://m1:443's key"));
        assert_eq!(code, 7);
    }
}
