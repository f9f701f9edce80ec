//! `pir safebrowsing build|serve|servers|proxy|firefox-profile` as a library: the commands'
//! flags ([`SafeBrowsingCommand`]), the servers' kind on `pir-host`, the local proxy on the
//! runtime's loopback listener, and the files the commands write (database, servers file,
//! Firefox profile). The `pir` binary parses the flags and calls [`run`].
//!
//! Private Safe Browsing as in Checklist (Kogan and Corrigan-Gibbs 2021, section 7.2): two
//! servers hold the list's full hashes, and a proxy on the user's machine answers the browser's
//! Safe Browsing v4 calls with private lookups.

use std::path::Path;

use anyhow::{Context, Result};
use pir_keys::PublicKey;

use crate::list::{ListDatabase, Threat, UpdateReport};

mod args;
mod build;
mod firefox;
mod proxy;
mod serve;
mod shard;
mod shard_serve;

pub use args::{
    SafeBrowsingCommand, SbBuildArgs, SbFirefoxArgs, SbProxyArgs, SbScheme, SbServeArgs,
    SbServeSettings, SbServersArgs,
};
pub use firefox::{firefox_prefs, write_firefox_profile};
pub use proxy::state_dir;
pub use serve::bucket_release;
pub use shard_serve::{serve_front as serve_front_end, serve_shard};

/// What users must trust, printed by every command that talks to the servers: the
/// registry's entries of the schemes a Safe Browsing server answers.
pub const PRIVACY: pir_service::registry::Privacy =
    pir_service::registry::Privacy(pir_service::checklist::Checklist::SCHEMES);

/// First line of a servers file.
pub const SERVERS_HEADER: &str = "pir-safebrowsing-servers-v1";

/// Runs one `pir safebrowsing` command.
pub async fn run(command: SafeBrowsingCommand) -> Result<()> {
    match command {
        SafeBrowsingCommand::Build(args) => build::build(&args),
        SafeBrowsingCommand::Serve(args) => serve::serve(args).await,
        SafeBrowsingCommand::Servers(args) => write_servers(&args),
        SafeBrowsingCommand::Proxy(args) => proxy::proxy(&args).await,
        SafeBrowsingCommand::FirefoxProfile(args) => firefox::firefox_profile(&args),
    }
}

/// Reads and checks a database file.
fn open_database(path: &Path) -> Result<ListDatabase> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    ListDatabase::decode(&bytes).with_context(|| format!("{}", path.display()))
}

/// What a database holds per list, and the lists it has no source for (served empty).
pub fn lists_line(db: &ListDatabase) -> String {
    let served: Vec<String> = db
        .sources()
        .iter()
        .map(|t| format!("{t} {} ({})", db.count(t), t.table()))
        .collect();
    let missing: Vec<String> = Threat::ALL
        .iter()
        .filter(|t| !db.sources().contains(**t))
        .map(|t| format!("{t} ({})", t.table()))
        .collect();
    let mut line = format!("lists: {}", served.join(", "));
    if !missing.is_empty() {
        line.push_str(&format!(
            "; no source for {} (served empty)",
            missing.join(", ")
        ));
    }
    line
}

/// The text of the servers file `pir safebrowsing proxy` reads: server 0 (offline) first,
/// then server 1 (online).
pub fn servers_file(servers: &[(String, PublicKey)]) -> Result<String> {
    pir_client::servers_file::encode(SERVERS_HEADER, 2, servers)
        .map_err(anyhow::Error::msg)
        .context("give --server URL=SERVER.pub for server 0 (offline), then server 1 (online)")
}

/// `pir safebrowsing servers`.
fn write_servers(args: &SbServersArgs) -> Result<()> {
    let servers = args
        .servers
        .iter()
        .map(|arg| Ok(pir_client::servers_file::parse_arg(arg)?))
        .collect::<Result<Vec<_>>>()?;
    let text = servers_file(&servers)?;
    pir_fs::write_atomic_bytes(&args.out, text.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("servers file {}:", args.out.display());
    print!("{text}");
    Ok(())
}

/// What one update `step` that made `db` changed, and what it costs clients: hints for the
/// records of the new buckets large enough to be hinted, DPF lookups for the others.
pub fn update_summary(db: &ListDatabase, step: &UpdateReport) -> String {
    let created: Vec<usize> = db
        .buckets()
        .iter()
        .filter(|b| step.created.contains(&b.id))
        .map(|b| b.len())
        .collect();
    let hinted: usize = created.iter().filter(|&&n| n >= db.dpf_below()).sum();
    let by_dpf: usize = created.iter().filter(|&&n| n < db.dpf_below()).sum();
    format!(
        "version {} of list {:?}: {} added, {} removed, {} moved between lists; {} bucket(s) \
         made, {} dropped; a client fetches hints for {hinted} records ({:.1} % of re-hinting \
         all {}) and looks up {by_dpf} by DPF",
        db.version(),
        db.name(),
        step.added,
        step.removed,
        step.relisted,
        step.created.len(),
        step.dropped.len(),
        100.0 * hinted as f64 / db.len().max(1) as f64,
        db.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_file_lists_two_servers_and_reads_back() {
        let servers = vec![
            ("https://127.0.0.1:8471".to_string(), PublicKey([1; 32])),
            ("https://127.0.0.1:8472/".to_string(), PublicKey([2; 32])),
        ];
        let text = servers_file(&servers).unwrap();
        assert!(text.starts_with("pir-safebrowsing-servers-v1\n"));
        assert!(text.contains(&format!(
            "https://127.0.0.1:8472 {}\n",
            hex::encode([2; 32])
        )));
        let read = pir_client::servers_file::parse(SERVERS_HEADER, 2, "test", &text).unwrap();
        assert_eq!(read[0].0, "https://127.0.0.1:8471");
        assert_eq!(read[1].1, PublicKey([2; 32]));
    }

    #[test]
    fn a_servers_file_needs_exactly_two_servers() {
        let one = vec![("https://127.0.0.1:8471".to_string(), PublicKey([1; 32]))];
        let error = format!("{:#}", servers_file(&one).unwrap_err());
        assert!(
            error.contains("server 0 (offline), then server 1"),
            "{error}"
        );
    }
}
