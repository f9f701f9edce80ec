//! `pir fetch`: one file of the release, privately, from the mirrors of the signed list.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use pir_keys::PublicKey;

use super::SchemeArg;
use crate::current_list::SignedList;
use crate::fetch::{FetchedMany, SchemeChoice};

/// `pir fetch`.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Name of the file in the release (as listed by `pir release show`).
    pub name: String,
    /// The signed mirror list (from `pir mirror-list build`); with --vendor-pub.
    #[arg(
        long,
        value_name = "MIRRORS",
        requires = "vendor_pub",
        required_unless_present = "vendor"
    )]
    pub mirrors: Option<PathBuf>,
    /// The vendor's public key; the mirror list and manifest must be signed by it.
    #[arg(long, value_name = "VENDOR.pub", requires = "mirrors")]
    pub vendor_pub: Option<PathBuf>,
    /// Take the current mirror list from the vendor service, as https://HOST:PORT=VENDOR.pub
    /// (the key pins its TLS and verifies the list and the manifest). When the service cannot
    /// be reached, the list kept from an earlier fetch is refreshed from its mirrors.
    #[arg(long, value_name = "URL=VENDOR.pub", conflicts_with_all = ["mirrors", "vendor_pub"])]
    pub vendor: Option<String>,
    /// Where to write the file; written atomically, never partially. `-` writes it to
    /// standard output once it has been verified (evidence files then go to the current
    /// directory).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Scheme.
    #[arg(long, value_enum, default_value_t = SchemeArg::RaidPir)]
    pub scheme: SchemeArg,
    /// Mirrors asked per query (default: 3, or fewer if the list is shorter); the rest are spares.
    #[arg(long)]
    pub servers: Option<usize>,
    /// RAID-PIR redundancy r (2 <= r <= servers): privacy holds unless r of them collude.
    #[arg(long, default_value_t = 2)]
    pub redundancy: usize,
    /// RAID-PIR chunks c (default: servers); one query fetches up to c blocks.
    #[arg(long)]
    pub chunks: Option<usize>,
    /// Where the client remembers the newest release version it used, to refuse a mirror
    /// that rolls it back (default: $PIR_STATE_DIR, $XDG_STATE_HOME/pir or ~/.local/state/pir).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print the result as one JSON object on standard output (for scripts).
    #[arg(long)]
    pub json: bool,
}

/// `pir fetch`: checks the flags against the mirror list, fetches, and reports on standard
/// output (standard error with `--out -`) or as JSON.
pub(super) async fn run(args: &FetchArgs) -> Result<()> {
    let to_stdout = args.out == Path::new(crate::fetch::STDOUT);
    if to_stdout && args.json {
        bail!("--json and --out - both want standard output: write the file somewhere");
    }
    let state_dir = crate::freshness::state_dir(args.state_dir.as_deref())?;
    let (list, vendor) = match (&args.vendor, &args.mirrors, &args.vendor_pub) {
        (Some(service), _, _) => {
            let service = super::vendor_client::parse_vendor(service)?;
            let list = super::vendor_client::starting_list(&service, &state_dir).await?;
            (list, service.key)
        }
        (None, Some(mirrors), Some(vendor_pub)) => {
            let vendor = PublicKey::load(vendor_pub)?;
            (SignedList::load(mirrors, &vendor)?, vendor)
        }
        _ => bail!("pass --vendor URL=VENDOR.pub, or --mirrors FILE --vendor-pub VENDOR.pub"),
    };
    let choice = scheme_choice(args, list.list.mirrors.len())?;
    let (fetched, evidence) = crate::fetch::fetch_listed_to_file(
        &args.name, list, &vendor, &state_dir, &args.out, choice,
    )
    .await?;
    for incident in &fetched.incidents {
        eprintln!("warning: mirror {} {}", incident.url, incident.what);
    }
    for path in &evidence {
        eprintln!(
            "warning: evidence kept: {} (check it with `pir evidence check`)",
            path.display()
        );
    }
    if args.json {
        println!("{}", json_report(args, &fetched, &evidence, choice));
    } else if to_stdout {
        // With `--out -` standard output is the file itself.
        eprintln!("{}", summary(args, &fetched, choice));
    } else {
        println!("{}", summary(args, &fetched, choice));
    }
    Ok(())
}

/// The scheme the flags ask for over a mirror list of `listed` mirrors: `--servers` mirrors
/// (default 3, or fewer if the list is shorter), checked against the list and the scheme.
pub fn scheme_choice(args: &FetchArgs, listed: usize) -> Result<SchemeChoice> {
    let servers = args.servers.unwrap_or(listed.min(3));
    if servers > listed {
        bail!("--servers {servers} but the mirror list has only {listed} mirrors");
    }
    if args.scheme == SchemeArg::Dpf && args.servers.is_some_and(|n| n != 2) {
        bail!("--scheme dpf asks exactly 2 mirrors; leave out --servers");
    }
    Ok(args
        .scheme
        .choice(servers, args.redundancy, args.chunks.unwrap_or(servers)))
}

/// Bytes sent to and received from all mirrors.
fn traffic(fetched: &FetchedMany) -> (u64, u64) {
    let sent = fetched.stats.iter().map(|s| s.bytes_sent).sum();
    let received = fetched.stats.iter().map(|s| s.bytes_received).sum();
    (sent, received)
}

/// The `--json` report: one object.
fn json_report(
    args: &FetchArgs,
    fetched: &FetchedMany,
    evidence: &[PathBuf],
    choice: SchemeChoice,
) -> serde_json::Value {
    let (sent, received) = traffic(fetched);
    let incidents: Vec<serde_json::Value> = fetched
        .incidents
        .iter()
        .map(|i| serde_json::json!({ "mirror": i.url, "what": i.what }))
        .collect();
    serde_json::json!({
        "name": args.name,
        "out": args.out,
        "bytes": fetched.total_bytes(),
        "blocks": fetched.blocks,
        "queries_per_mirror": fetched.queries,
        "bytes_sent": sent,
        "bytes_received": received,
        "milliseconds": fetched.elapsed.as_secs_f64() * 1e3,
        "incidents": incidents,
        "evidence": evidence,
        "privacy": choice.assumption(),
    })
}

/// The two lines a fetch ends with: what came back, and what privacy rests on.
fn summary(args: &FetchArgs, fetched: &FetchedMany, choice: SchemeChoice) -> String {
    let (sent, received) = traffic(fetched);
    format!(
        "fetched {} -> {} ({} bytes, {} blocks, {} quer{} per mirror, {} bytes sent, {} received, {:.1} ms)\nprivacy: {}",
        args.name,
        args.out.display(),
        fetched.total_bytes(),
        fetched.blocks,
        fetched.queries,
        if fetched.queries == 1 { "y" } else { "ies" },
        sent,
        received,
        fetched.elapsed.as_secs_f64() * 1e3,
        choice.assumption()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// `pir fetch` alone, to parse its flags as the binary does.
    #[derive(Debug, Parser)]
    struct Fetch {
        #[command(flatten)]
        args: FetchArgs,
    }

    fn choice(flags: &[&str], listed: usize) -> Result<SchemeChoice> {
        let base = [
            "fetch",
            "NAME",
            "--mirrors",
            "M",
            "--vendor-pub",
            "V",
            "--out",
            "O",
        ];
        let parsed = Fetch::try_parse_from(base.iter().chain(flags)).unwrap();
        scheme_choice(&parsed.args, listed)
    }

    #[test]
    fn three_mirrors_by_default_or_all_of_a_shorter_list() {
        let raid = |servers, redundancy, chunks| SchemeChoice::RaidPir {
            servers,
            redundancy,
            chunks,
        };
        assert_eq!(choice(&[], 5).unwrap(), raid(3, 2, 3));
        assert_eq!(choice(&[], 2).unwrap(), raid(2, 2, 2));
        assert_eq!(
            choice(&["--servers", "4", "--redundancy", "3", "--chunks", "8"], 4).unwrap(),
            raid(4, 3, 8)
        );
        assert_eq!(
            choice(&["--scheme", "chor"], 5).unwrap(),
            SchemeChoice::Chor { servers: 3 }
        );
        assert_eq!(choice(&["--scheme", "dpf"], 5).unwrap(), SchemeChoice::Dpf);
        assert_eq!(
            choice(&["--scheme", "dpf", "--servers", "2"], 5).unwrap(),
            SchemeChoice::Dpf
        );
    }

    #[test]
    fn impossible_mirror_counts_are_refused() {
        let refused = |flags: &[&str], listed| choice(flags, listed).unwrap_err().to_string();
        assert_eq!(
            refused(&["--servers", "4"], 3),
            "--servers 4 but the mirror list has only 3 mirrors"
        );
        assert_eq!(
            refused(&["--scheme", "dpf", "--servers", "3"], 5),
            "--scheme dpf asks exactly 2 mirrors; leave out --servers"
        );
    }
}
