//! The vendor service's clients: `pir mirror register`, `pir evidence submit`, and the list
//! `pir fetch --vendor` takes from the service.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use pir_client::{HttpsTransport, Transport};
use pir_core::codec::Codec;
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::SecretKey;

use crate::current_list::{SignedList, MAX_LIST_BYTES};
use crate::freshness::{now_unix, Freshness};
use crate::mirrors::{check_mirror_url, parse_mirror_arg};
use crate::vendor::wire::{Outcome, Registration, VendorReply, VendorRequest, MAX_EVIDENCE_BYTES};
use crate::MirrorEntry;

use super::{EVIDENCE_CHEATED, EVIDENCE_NOT_SIGNED};

/// `pir mirror register`.
#[derive(Debug, Args)]
pub struct MirrorRegisterArgs {
    /// The vendor service and its public key, as https://HOST:PORT=VENDOR.pub.
    #[arg(long, value_name = "URL=VENDOR.pub")]
    pub vendor: String,
    /// The mirror's secret key (the one `pir mirror serve --key` uses).
    #[arg(long, value_name = "M.key")]
    pub key: PathBuf,
    /// Where clients reach the mirror: https://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub public_url: String,
}

/// `pir evidence submit`.
#[derive(Debug, Args)]
pub struct EvidenceSubmitArgs {
    /// The evidence file written by `pir fetch`.
    pub evidence: PathBuf,
    /// The vendor service and its public key, as https://HOST:PORT=VENDOR.pub.
    #[arg(long, value_name = "URL=VENDOR.pub")]
    pub vendor: String,
}

/// The vendor service named by `arg` (`URL=VENDOR.pub`).
pub fn parse_vendor(arg: &str) -> Result<MirrorEntry> {
    parse_mirror_arg(arg).with_context(|| format!("--vendor {arg}"))
}

fn connect(vendor: &MirrorEntry) -> Result<HttpsTransport> {
    Ok(HttpsTransport::new(&[(vendor.url.clone(), vendor.key)])?)
}

/// Sends `request` to the vendor service (TLS pinned to the vendor key) and returns its reply.
pub async fn ask(vendor: &MirrorEntry, request: &VendorRequest) -> Result<VendorReply> {
    let transport = connect(vendor)?;
    let envelope =
        wire::encode_envelope(SchemeId::Control, MessageKind::Query, &request.to_bytes());
    let bytes = transport
        .exchange(0, envelope, 4096)
        .await
        .with_context(|| format!("the vendor service at {}", vendor.url))?;
    let reply = wire::decode_envelope(&bytes, 4096)?;
    match reply.kind {
        MessageKind::Answer => Ok(VendorReply::from_bytes(reply.body, &())?),
        MessageKind::Error => {
            let (_, message) = wire::decode_error(reply.body)?;
            bail!("the vendor service refused: {message}")
        }
        other => bail!("the vendor service sent a {other:?} message"),
    }
}

/// The current mirror list from the vendor service, verified under its key.
pub async fn list_from_vendor(vendor: &MirrorEntry) -> Result<SignedList> {
    let bytes = connect(vendor)?
        .hint(0, MAX_LIST_BYTES)
        .await
        .with_context(|| format!("the vendor service at {}", vendor.url))?;
    Ok(SignedList::verify(bytes, &vendor.key)?)
}

/// The list `pir fetch --vendor` starts from: the vendor service's, or, when it cannot be
/// reached, the list kept from an earlier fetch (which the session then refreshes from a
/// mirror, [`crate::current_list::from_mirrors`]).
pub async fn starting_list(vendor: &MirrorEntry, state_dir: &Path) -> Result<SignedList> {
    match list_from_vendor(vendor).await {
        Ok(list) => Ok(list),
        Err(e) => {
            let kept = Freshness::for_mirror_lists(state_dir, &vendor.key)
                .kept_list()
                .and_then(|bytes| SignedList::verify(bytes, &vendor.key).ok());
            match kept {
                Some(list) => {
                    eprintln!(
                        "warning: {e:#}; using the mirror list kept from an earlier fetch \
                         (version {}) and asking its mirrors for a newer one",
                        list.list.list_version
                    );
                    Ok(list)
                }
                None => bail!(
                    "{e:#}, and no mirror list is kept from an earlier fetch: try again later, \
                     or pass --mirrors FILE --vendor-pub VENDOR.pub"
                ),
            }
        }
    }
}

/// `pir mirror register`.
pub(super) async fn register(args: &MirrorRegisterArgs) -> Result<()> {
    let vendor = parse_vendor(&args.vendor)?;
    let key = SecretKey::load(&args.key)?;
    let url = args
        .public_url
        .strip_suffix('/')
        .unwrap_or(&args.public_url);
    check_mirror_url(url).map_err(|why| anyhow::anyhow!("--public-url {url}: {why}"))?;
    let signed = Registration {
        url: url.to_owned(),
        mirror: key.public(),
        vendor: vendor.key,
        created_unix: now_unix(),
    }
    .sign(&key);
    let reply = ask(&vendor, &VendorRequest::Register(signed)).await?;
    match reply.outcome {
        Outcome::Pending => println!("registered, pending: {}", reply.message),
        Outcome::Admitted => println!("registered, admitted: {}", reply.message),
        _ => bail!("registration refused: {}", reply.message),
    }
    println!(
        "the vendor's current release is {}: serve it (pir mirror serve --release DIR)",
        hex::encode(reply.release_id)
    );
    Ok(())
}

/// `pir evidence submit`: exit codes as `pir evidence check`'s.
pub(super) async fn submit(args: &EvidenceSubmitArgs) -> Result<ExitCode> {
    let vendor = parse_vendor(&args.vendor)?;
    let bytes = std::fs::read(&args.evidence)
        .with_context(|| format!("reading {}", args.evidence.display()))?;
    if bytes.len() > MAX_EVIDENCE_BYTES {
        bail!(
            "{} is larger than the vendor takes ({MAX_EVIDENCE_BYTES} bytes)",
            args.evidence.display()
        );
    }
    let reply = ask(&vendor, &VendorRequest::Evidence(bytes)).await?;
    println!("{}", reply.message);
    Ok(match reply.outcome {
        Outcome::Proven => ExitCode::from(EVIDENCE_CHEATED),
        _ if reply.message.starts_with("not signed") => ExitCode::from(EVIDENCE_NOT_SIGNED),
        _ if reply.message.starts_with("correct") => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}
