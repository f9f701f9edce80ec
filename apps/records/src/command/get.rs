//! `pir get`: one record or value, fetched privately, written to a file, standard output
//! or a JSON report.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use pir_client::lattice::LatticeSession;
use pir_client::HttpsTransport;
use pir_keys::PublicKey;

use super::{GetArgs, KeyNotFound};
use crate::lookup::{self, Found, LookupError, Query};

/// `pir get`.
pub(super) async fn get(args: &GetArgs) -> Result<()> {
    let (url, key) = match &args.server_pub {
        Some(path) => (args.server.clone(), PublicKey::load(path)?),
        None => pir_client::servers_file::parse_arg(&args.server)?,
    };
    let cache = args
        .cache_dir
        .clone()
        .or_else(pir_client::lattice::default_cache_dir);
    let database = args.db.as_deref().map(database_version).transpose()?;
    let (session, header) = lookup::connect_database(&url, key, database, cache.as_deref())
        .await
        .with_context(|| format!("connecting to {url}"))?;
    let (what, query) = match (args.index, &args.lookup) {
        (Some(index), None) => (format!("record {index}"), Query::Index(index)),
        (None, Some(k)) => (format!("key {k:?}"), Query::Key(k.as_bytes())),
        _ => bail!("give a record INDEX or --lookup KEY"),
    };
    let found = match lookup::lookup(&session, &header, query).await {
        Ok(found) => found,
        Err(LookupError::KeyNotFound) => {
            return Err(KeyNotFound(args.lookup.clone().unwrap_or_default()).into())
        }
        Err(other) => return Err(other.into()),
    };
    // `--out -` is standard output, as no `--out` at all.
    let out = args
        .out
        .as_ref()
        .filter(|path| path.as_path() != Path::new("-"));
    if args.json {
        return report_json(&session, &what, &found, out);
    }
    report(&session, &what, &found, out)
}

/// A database version as `pir serve` prints it (64 hex digits).
fn database_version(text: &str) -> Result<[u8; 32]> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .with_context(|| {
            format!("--db {text}: a database version is 64 hex digits, as `pir serve` prints it")
        })
}

/// `--json`: the value written to `out`, or in the report as hex; the report on standard
/// output.
fn report_json(
    session: &LatticeSession<HttpsTransport>,
    what: &str,
    found: &Found,
    out: Option<&PathBuf>,
) -> Result<()> {
    if let Some(path) = out {
        write_atomic(path, &found.value)?;
    }
    let scheme = session.header().params.scheme;
    let report = serde_json::json!({
        "what": what,
        "bytes": found.value.len(),
        "value_hex": out.is_none().then(|| hex::encode(&found.value)),
        "out": out,
        "scheme": scheme.id().name(),
        "request_bytes": found.request_bytes,
        "reply_bytes": found.reply_bytes,
        "hint_from_cache": session.hint_from_cache(),
        "hint_bytes": session.hint_bytes(),
        "privacy": lookup::privacy(scheme).to_string(),
    });
    println!("{report}");
    Ok(())
}

/// The value written to `out`, or to standard output (the summary then on standard error).
fn report(
    session: &LatticeSession<HttpsTransport>,
    what: &str,
    found: &Found,
    out: Option<&PathBuf>,
) -> Result<()> {
    let hint_note = if session.hint_from_cache() {
        "hint from cache".to_string()
    } else {
        format!("hint downloaded, {} bytes", session.hint_bytes())
    };
    let scheme = session.header().params.scheme;
    let summary = format!(
        "{what}: {} bytes ({}, {} bytes sent, {} received, {})",
        found.value.len(),
        scheme.id().name(),
        found.request_bytes,
        found.reply_bytes,
        hint_note
    );
    match out {
        Some(path) => {
            write_atomic(path, &found.value)?;
            println!("{summary} -> {}", path.display());
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(&found.value) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(e).context("writing the value to standard output")
                }
                _ => {}
            }
            eprintln!("{summary}");
        }
    }
    eprintln!("privacy: {}", lookup::privacy(scheme));
    Ok(())
}

/// Replaces `path` with `bytes` whole or not at all (`pir-fs`).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    pir_fs::write_atomic_bytes(path, bytes).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_version_is_64_hex_digits() {
        assert_eq!(database_version(&"ab".repeat(32)).unwrap(), [0xab; 32]);
        for bad in ["ab", "zz", &"ab".repeat(33)] {
            let error = database_version(bad).unwrap_err().to_string();
            assert!(
                error.contains("a database version is 64 hex digits"),
                "{error}"
            );
        }
    }
}
