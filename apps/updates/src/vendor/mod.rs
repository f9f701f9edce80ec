//! The vendor service's logic, sans I/O (`pir vendor serve` runs it on the server host, see
//! [`crate::command`]).
//!
//! upPIR's vendor (Cappos 2013, section 4.1) provides "the manifest and a current list of
//! mirrors". Here it also runs the fleet: mirrors register (signed by their keys,
//! [`wire::SignedRegistration`]), the operator approves them, the vendor probes each on a
//! period ([`probe::probe`]: up, serving the current release, answering a private query
//! correctly), takes clients' evidence ([`judge_evidence`], exactly what `pir evidence check`
//! does), and signs the next mirror list from what it learned ([`Registry::publish`]), each
//! change with its reason ([`Decision`]).
//!
//! - [`wire`]: the service's request and reply messages.
//! - [`registry`]: mirrors, approvals, probe outcomes and proofs -> the next list.
//! - [`probe`]: one mirror's probe, over any [`pir_client::Transport`].
//!
//! What it does not do: sockets, timers, files, logging (the command does); nothing here sees
//! a client's query: the vendor never serves PIR, and the evidence it judges is a client's
//! own choice to reveal one request.

pub mod probe;
pub mod registry;
pub mod wire;

pub use registry::{Action, Decision, ProbeOutcome, Reason, Registry};

use pir_client::{Evidence, Verdict};

use crate::release::Release;

/// What evidence handed to the vendor shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// The mirror signed a wrong answer: proof (the words say which query).
    Proven(Evidence, String),
    /// It proves nothing against the mirror (why, in words).
    NotProven(String),
}

/// Judges evidence file `bytes` against the vendor's `release`, exactly as `pir evidence
/// check` does: decode, the release must be this one, then every answer the mirror signed is
/// recomputed from the (verified) release.
pub fn judge_evidence(bytes: &[u8], release: &Release) -> Judgement {
    let evidence = match Evidence::decode(bytes) {
        Ok(evidence) => evidence,
        Err(e) => return Judgement::NotProven(format!("not an evidence file: {e}")),
    };
    if evidence.release_id != release.release_id {
        return Judgement::NotProven(format!(
            "the evidence is for release {}; this vendor judges its current release {}",
            hex::encode(&evidence.release_id[..8]),
            hex::encode(&release.release_id[..8])
        ));
    }
    let mirror = format!(
        "mirror {} (key {})",
        evidence.url,
        evidence.key.fingerprint()
    );
    match pir_client::evidence::check(&evidence, &release.database) {
        Ok(Verdict::Cheated { query }) => {
            let line =
                format!("CHEATED: {mirror} signed a wrong answer to query {query} of the batch");
            Judgement::Proven(evidence, line)
        }
        Ok(Verdict::Correct) => {
            Judgement::NotProven(format!("correct: every answer {mirror} signed is right"))
        }
        Ok(Verdict::NotSigned) => Judgement::NotProven(format!(
            "not signed by {mirror}'s key: proves nothing about it"
        )),
        Err(e) => Judgement::NotProven(format!("the evidence cannot be judged: {e}")),
    }
}
