//! The private-updates commands of `pir`, as a library: `pir release build|show` (`pir
//! release tune` is measured by `pir-bench`, which the binary hands it to), `pir mirror
//! serve`, `pir mirror-list build`, `pir fetch`, `pir evidence check`, `pir apt
//! install-method|method` and `pir demo`.
//!
//! It holds their flags (clap types, flattened into the binary's command list), the mirror's
//! settings and its server kind on `pir-host`, and one entry point per command list: [`run`]
//! for [`UpdatesCommand`] and [`demo::run`] for [`DemoArgs`]. The binary only parses, calls
//! these and turns errors into messages; exit codes other than 0 and 1 are the
//! [`ExitCode`]s returned here ([`EVIDENCE_CHEATED`], [`EVIDENCE_NOT_SIGNED`]) and the one the
//! binary derives from [`crate::UpdateError::FetchFailed`] (3).
//!
//! What it does not do: parse the top-level `pir` flags, set up logging or the async runtime
//! (the binary does), or print errors.

use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};

use crate::fetch::SchemeChoice;

mod apt;
pub mod demo;
mod evidence;
mod fetch;
mod mirror;
mod vendor;
pub mod vendor_client;
pub mod vendor_serve;

pub use apt::AptCommand;
pub use demo::DemoArgs;
pub use evidence::{EvidenceCheckArgs, EvidenceCommand};

/// Exit code of `pir evidence check` when the mirror's signed answer is wrong: proof.
pub const EVIDENCE_CHEATED: u8 = 6;

/// Exit code of `pir evidence check` when the reply is not signed by the mirror's key.
pub const EVIDENCE_NOT_SIGNED: u8 = 7;

pub use fetch::FetchArgs;
pub use mirror::{MirrorCommand, MirrorServeArgs, MirrorSettings, DEFAULT_RETIRE_SECONDS};
pub use vendor::{
    MirrorListBuildArgs, MirrorListCommand, ReleaseBuildArgs, ReleaseCommand, ReleaseShowArgs,
    ReleaseTuneArgs,
};
pub use vendor_client::{EvidenceSubmitArgs, MirrorRegisterArgs};
pub use vendor_serve::{VendorApproveArgs, VendorServeArgs, VendorSettings};

/// The private-updates commands, in the order `pir --help` lists them (`pir demo` is
/// separate: it comes first in that list).
#[derive(Debug, Subcommand)]
pub enum UpdatesCommand {
    /// Vendor: build and inspect releases.
    #[command(subcommand)]
    Release(ReleaseCommand),
    /// Mirror: serve a release privately over HTTPS.
    #[command(subcommand)]
    Mirror(MirrorCommand),
    /// Vendor: the service that runs the mirror fleet (registrations, probes, evidence, the
    /// signed list).
    #[command(subcommand)]
    Vendor(VendorCommand),
    /// Vendor: write the signed list of mirrors clients may use.
    #[command(name = "mirror-list", subcommand)]
    MirrorList(MirrorListCommand),
    /// Client: fetch one file of the release privately.
    Fetch(FetchArgs),
    /// Check a mirror's signed answer (saved by `pir fetch`) against the release.
    #[command(subcommand)]
    Evidence(EvidenceCommand),
    /// Private updates for apt: the `pir` method for `pir://` sources.
    #[command(subcommand)]
    Apt(AptCommand),
}

/// `pir vendor ...`.
#[derive(Debug, Subcommand)]
pub enum VendorCommand {
    /// Serve the vendor service: the current signed mirror list and release id over HTTPS
    /// (pinned to the vendor key), mirror registrations, probes of every mirror each period
    /// (up, serving the release, answering a private query correctly), clients' evidence.
    /// A dead or lying mirror leaves the next list within one probe period.
    Serve(Box<VendorServeArgs>),
    /// Approve mirror keys: their registrations are admitted (and a proven liar's ban lifted).
    Approve(VendorApproveArgs),
}

/// Carries out `command`. Only `pir evidence check` has exit codes of its own; a fetch that
/// failed returns [`crate::UpdateError::FetchFailed`] inside the error, for the caller to map.
pub async fn run(command: UpdatesCommand) -> anyhow::Result<ExitCode> {
    let done = match command {
        UpdatesCommand::Release(ReleaseCommand::Build(args)) => vendor::build_release(&args),
        UpdatesCommand::Release(ReleaseCommand::Show(args)) => {
            vendor::show_release(&args.release, args.vendor_pub.as_deref())
        }
        UpdatesCommand::Release(ReleaseCommand::Tune(_)) => {
            anyhow::bail!("internal: `pir release tune` is run by pir_bench::tune")
        }
        UpdatesCommand::MirrorList(MirrorListCommand::Build(args)) => {
            vendor::build_mirror_list(&args)
        }
        UpdatesCommand::Mirror(MirrorCommand::Serve(args)) => mirror::serve(args).await,
        UpdatesCommand::Mirror(MirrorCommand::Register(args)) => {
            vendor_client::register(&args).await
        }
        UpdatesCommand::Vendor(VendorCommand::Serve(args)) => vendor_serve::serve(&args).await,
        UpdatesCommand::Vendor(VendorCommand::Approve(args)) => vendor_serve::approve(&args),
        UpdatesCommand::Evidence(EvidenceCommand::Submit(args)) => {
            return vendor_client::submit(&args).await;
        }
        UpdatesCommand::Fetch(args) => fetch::run(&args).await,
        UpdatesCommand::Evidence(EvidenceCommand::Check(args)) => {
            return evidence::check(&args.evidence, &args.release);
        }
        UpdatesCommand::Apt(AptCommand::InstallMethod { dir }) => apt::install_method(&dir),
        UpdatesCommand::Apt(AptCommand::Method) => apt::method().await,
    };
    done.map(|()| ExitCode::SUCCESS)
}

/// The schemes a client can fetch with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemeArg {
    /// RAID-PIR: seed-compressed queries, each mirror scans r/n of the data; private while no r of the mirrors asked collude.
    RaidPir,
    /// Chor: private while at least one of the mirrors asked does not collude with the others.
    Chor,
    /// DPF: two mirrors, private while they do not collude; each receives a short DPF key
    /// (hundreds of bytes) instead of one bit per block.
    Dpf,
}

impl SchemeArg {
    /// The scheme over `servers` mirrors, RAID-PIR with `redundancy` and `chunks` (DPF always
    /// asks two mirrors).
    pub fn choice(self, servers: usize, redundancy: usize, chunks: usize) -> SchemeChoice {
        match self {
            SchemeArg::RaidPir => SchemeChoice::RaidPir {
                servers,
                redundancy,
                chunks,
            },
            SchemeArg::Chor => SchemeChoice::Chor { servers },
            SchemeArg::Dpf => SchemeChoice::Dpf,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The updates commands alone, parsed as the binary parses them.
    #[derive(Debug, Parser)]
    struct Pir {
        #[command(subcommand)]
        command: UpdatesCommand,
    }

    fn parse(line: &str) -> Result<UpdatesCommand, clap::Error> {
        Pir::try_parse_from(std::iter::once("pir").chain(line.split_whitespace()))
            .map(|p| p.command)
    }

    #[test]
    fn the_vendor_command_shapes_parse() {
        let serve = parse(
            "vendor serve --key v.key --release r --listen 127.0.0.1:9443 --allow a.pub \
             --allow b.pub --probe-seconds 5 --list-valid-hours 2",
        )
        .unwrap();
        let UpdatesCommand::Vendor(VendorCommand::Serve(args)) = serve else {
            panic!("{serve:?}")
        };
        assert_eq!(args.allow.len(), 2);
        assert_eq!(args.probe_seconds, Some(5));
        assert_eq!(args.list_valid_hours, Some(2.0));
        assert!(matches!(
            parse("vendor approve m.pub --state s").unwrap(),
            UpdatesCommand::Vendor(VendorCommand::Approve(_))
        ));
        assert!(matches!(
            parse(
                "mirror register --vendor https://v:1=v.pub --key m.key --public-url https://m:2"
            )
            .unwrap(),
            UpdatesCommand::Mirror(MirrorCommand::Register(_))
        ));
        assert!(matches!(
            parse("evidence submit e.pir --vendor https://v:1=v.pub").unwrap(),
            UpdatesCommand::Evidence(EvidenceCommand::Submit(_))
        ));
        let fetch = parse("fetch NAME --vendor https://v:1=v.pub --out f").unwrap();
        let UpdatesCommand::Fetch(args) = fetch else {
            panic!("{fetch:?}")
        };
        assert_eq!(args.vendor.as_deref(), Some("https://v:1=v.pub"));
        assert!(parse("fetch NAME --mirrors m --vendor-pub v.pub --out f").is_ok());
        // One source of the list, and a list file needs its key.
        assert!(parse("fetch NAME --out f").is_err());
        assert!(parse("fetch NAME --mirrors m --out f").is_err());
        assert!(parse("fetch NAME --vendor https://v:1=v.pub --mirrors m --out f").is_err());
    }
}
