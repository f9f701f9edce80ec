//! `pir apt ...`: the `pir` method apt runs for `pir://` URIs, and its installer.
//!
//! apt starts the method, reads its capabilities, sends its configuration and then one
//! `600 URI Acquire` per file. The method reads every request already waiting and fetches all
//! their files in ONE private retrieval (one PIR batch per round), then answers each with
//! `201 URI Done` or `400 URI Failure`. Package files and indices alike are fetched privately
//! and checked against the signed release manifest and against the hashes apt expects from its
//! own signed index. Bad input from apt is answered with `400` and never stops the method.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Subcommand;
use pir_keys::PublicKey;

use crate::apt::{self, Config, Expected, Message};
use crate::fetch::{SchemeChoice, UpdateSession};

/// `pir apt ...`.
#[derive(Debug, Subcommand)]
pub enum AptCommand {
    /// Write DIR/pir, the program apt runs for pir:// URIs.
    ///
    /// DIR is /usr/lib/apt/methods for a system install, or any directory used with
    /// `-o Dir::Bin::Methods=DIR` (apt's own methods are then linked beside it). apt must be
    /// told the signed mirror list and the vendor key:
    ///   Acquire::pir::MirrorList "/etc/pir/mirrors.pir";
    ///   Acquire::pir::VendorKey "/etc/pir/vendor.pub";
    /// optionally Acquire::pir::StateDir (freshness state) and Acquire::pir::Servers (mirrors
    /// per query, default 3). In `deb pir://updates/ bookworm main` the host names no server:
    /// the path is the file's name in the release, so flat repositories (`deb pir://updates/ ./`)
    /// work too.
    #[command(verbatim_doc_comment)]
    InstallMethod {
        /// Where to write the method.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
    },
    /// The method itself: speaks apt's method protocol on standard input and output (apt runs
    /// it; you do not).
    Method,
}

/// How long the method waits after a request for more: apt writes its pipelined requests
/// back to back, so a few milliseconds catch them all.
const GATHER: Duration = Duration::from_millis(3);

/// Most RAID-PIR chunks the method asks for: one query fetches up to this many blocks.
const MAX_CHUNKS: usize = 16;

/// The system's apt methods directory.
const SYSTEM_METHODS: &str = "/usr/lib/apt/methods";

/// `pir apt install-method --dir DIR`: writes `DIR/pir`, a program that runs this `pir` as
/// the method. Outside the system directory, apt's own methods are linked beside it (apt looks
/// for all of its methods in `Dir::Bin::Methods`).
pub(super) fn install_method(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let exe = std::env::current_exe().context("finding this pir program")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let exe_text = exe
        .to_str()
        .context("the path of this pir program is not UTF-8")?;
    if exe_text.contains('\'') {
        anyhow::bail!("the path of this pir program contains a quote: {exe_text}");
    }
    let script = format!(
        "#!/bin/sh\n# The pir method for apt: pir:// URIs are fetched with private information retrieval.\n# Written by `pir apt install-method`; configure with Acquire::pir::MirrorList and Acquire::pir::VendorKey.\nexec '{exe_text}' apt method \"$@\"\n"
    );
    let target = dir.join("pir");
    pir_fs::write_atomic_bytes(&target, script.as_bytes())
        .with_context(|| format!("writing {}", target.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", target.display()))?;
    println!("installed {}", target.display());
    let system = Path::new(SYSTEM_METHODS);
    if dir.canonicalize().ok().as_deref() != system.canonicalize().ok().as_deref() {
        let mut linked = 0;
        if let Ok(entries) = std::fs::read_dir(system) {
            for entry in entries.flatten() {
                let link = dir.join(entry.file_name());
                if link.symlink_metadata().is_err() {
                    std::os::unix::fs::symlink(entry.path(), &link)
                        .with_context(|| format!("linking {}", link.display()))?;
                    linked += 1;
                }
            }
        }
        println!(
            "linked {linked} of apt's own methods from {SYSTEM_METHODS}; use it with -o Dir::Bin::Methods={}",
            dir.display()
        );
    }
    println!(
        "configure apt (for example in /etc/apt/apt.conf.d/50pir):\n  Acquire::pir::MirrorList \"/etc/pir/mirrors.pir\";\n  Acquire::pir::VendorKey \"/etc/pir/vendor.pub\";\nand a source such as:\n  deb pir://updates/ bookworm main"
    );
    Ok(())
}

/// Reads apt's messages from standard input on a thread of its own.
fn read_messages(send: tokio::sync::mpsc::UnboundedSender<Result<Message, String>>) {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut lines: Vec<String> = Vec::new();
    let mut size = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&buf)
            .trim_end_matches(['\n', '\r'])
            .to_string();
        if line.is_empty() {
            if !lines.is_empty() {
                let message = if size > apt::MAX_MESSAGE_BYTES {
                    Err(format!(
                        "a message of {size} bytes, over the limit of {}",
                        apt::MAX_MESSAGE_BYTES
                    ))
                } else {
                    apt::parse(&lines)
                };
                if send.send(message).is_err() {
                    return;
                }
                lines.clear();
                size = 0;
            }
            continue;
        }
        size += line.len();
        if size <= apt::MAX_MESSAGE_BYTES {
            lines.push(line);
        }
    }
}

fn send(message: &Message) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(message.encode().as_bytes());
    let _ = out.flush();
}

/// One file apt asked for, checked and ready to fetch.
struct Wanted {
    uri: String,
    name: String,
    filename: PathBuf,
    expected: Expected,
}

/// The method: answers apt until it closes standard input.
pub(super) async fn method() -> Result<()> {
    send(&apt::capabilities());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || read_messages(tx));
    let mut config = Config::default();
    let mut session: Option<UpdateSession<pir_client::HttpsTransport>> = None;
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        // Gather every request already waiting (apt pipelines): one retrieval for all.
        while let Ok(Some(message)) = tokio::time::timeout(GATHER, rx.recv()).await {
            batch.push(message);
        }
        let mut acquires = Vec::new();
        for message in batch {
            match message {
                Err(garbage) => send(&apt::failure("", &format!("pir method: {garbage}"), None)),
                Ok(m) if m.code == 601 => config = Config::from_message(&m),
                Ok(m) if m.code == 600 => acquires.push(m),
                Ok(m) => {
                    if let Some(uri) = m.get("URI") {
                        send(&apt::failure(
                            uri,
                            &format!("pir method: message {} is not supported", m.code),
                            None,
                        ));
                    }
                }
            }
        }
        if !acquires.is_empty() {
            acquire(&config, &mut session, acquires).await;
        }
    }
    Ok(())
}

/// Opens the session on first use, from apt's configuration.
async fn open_session(config: &Config) -> Result<UpdateSession<pir_client::HttpsTransport>> {
    let setting = |key: &str| {
        config.get(key).map(PathBuf::from).with_context(|| {
            format!(
                "{key} is not set: add `{key} \"/path\";` to apt's configuration (for example /etc/apt/apt.conf.d/50pir)"
            )
        })
    };
    let list = setting("Acquire::pir::MirrorList")?;
    let vendor = PublicKey::load(&setting("Acquire::pir::VendorKey")?)?;
    let state = crate::freshness::state_dir(config.get("Acquire::pir::StateDir").map(Path::new))?;
    let listed = crate::fetch::load_mirror_list(&list, &vendor)?.len();
    let need = servers(config, listed)?;
    Ok(UpdateSession::open(&list, &vendor, &state, need).await?)
}

fn servers(config: &Config, listed: usize) -> Result<usize> {
    match config.get("Acquire::pir::Servers") {
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|&n| (2..=listed).contains(&n))
            .with_context(|| {
                format!("Acquire::pir::Servers {text:?}: use 2 to {listed} (mirrors listed)")
            }),
        None => Ok(listed.min(3)),
    }
}

/// Answers one gathered batch of `600 URI Acquire` requests: every file they ask for in one
/// private retrieval, each answered with `201 URI Done` or `400 URI Failure`.
async fn acquire(
    config: &Config,
    session: &mut Option<UpdateSession<pir_client::HttpsTransport>>,
    acquires: Vec<Message>,
) {
    let wanted = checked_requests(acquires);
    if wanted.is_empty() {
        return;
    }
    if session.is_none() {
        match open_session(config).await {
            Ok(s) => *session = Some(s),
            Err(e) => return fail_all(&wanted, &format!("pir: {e:#}")),
        }
    }
    let Some(session) = session.as_ref() else {
        return;
    };
    let manifest = &session.release.manifest;
    let fetchable = start(manifest, wanted);
    if fetchable.is_empty() {
        return;
    }
    let names: Vec<&str> = fetchable.iter().map(|w| w.name.as_str()).collect();
    let blocks: u64 = fetchable
        .iter()
        .filter_map(|w| manifest.file(&w.name))
        .map(|entry| entry.block_count)
        .sum();
    let choice = match servers(config, session.mirrors.len()) {
        Ok(n) => SchemeChoice::RaidPir {
            servers: n,
            redundancy: 2,
            chunks: chunks_for(blocks, n),
        },
        Err(e) => return fail_all(&fetchable, &format!("pir: {e:#}")),
    };
    let fetched = match session.fetch(&names, choice).await {
        Ok(fetched) => fetched,
        Err(e) => return fail_all(&fetchable, &format!("pir: private fetch failed: {e}")),
    };
    for incident in &fetched.incidents {
        eprintln!("pir: mirror {} {}", incident.url, incident.what);
    }
    for (w, (_, bytes)) in fetchable.iter().zip(&fetched.files) {
        deliver(w, bytes);
    }
}

/// The requests that name a URI apt may ask us for and a file to write; the others are
/// answered with a failure here.
fn checked_requests(acquires: Vec<Message>) -> Vec<Wanted> {
    let mut wanted = Vec::new();
    for m in acquires {
        let Some(uri) = m.get("URI").map(str::to_string) else {
            send(&apt::failure(
                "",
                "pir method: a 600 URI Acquire without a URI",
                None,
            ));
            continue;
        };
        let Some(filename) = m.get("Filename").map(PathBuf::from) else {
            send(&apt::failure(
                &uri,
                "pir method: no Filename to write to",
                None,
            ));
            continue;
        };
        let checked = apt::release_name(&uri)
            .and_then(|name| Expected::from_message(&m).map(|expected| (name, expected)));
        match checked {
            Ok((name, expected)) => wanted.push(Wanted {
                uri,
                name,
                filename,
                expected,
            }),
            Err(e) => send(&apt::failure(&uri, &format!("pir method: {e}"), None)),
        }
    }
    wanted
}

/// Tells apt which files the release holds (`200 URI Start` with their size) and which it
/// does not (`400`, as a 404); returns the ones to fetch.
fn start(manifest: &crate::Manifest, wanted: Vec<Wanted>) -> Vec<Wanted> {
    let mut fetchable = Vec::new();
    for w in wanted {
        match manifest.file(&w.name) {
            Some(entry) => {
                send(
                    &Message::new(200, "URI Start")
                        .field("URI", &w.uri)
                        .field("Size", entry.size),
                );
                fetchable.push(w);
            }
            None => send(&apt::failure(
                &w.uri,
                &format!("{} is not in the release", w.name),
                Some("HttpError404"),
            )),
        }
    }
    fetchable
}

/// RAID-PIR chunks for fetching `blocks` blocks from `servers` mirrors.
///
/// One query fetches up to `chunks` blocks (one per chunk), so asking for as many chunks as
/// the files have blocks fetches them in one round: each mirror makes ONE pass over its share
/// of the release instead of one per round, for answers of `r/n x chunks` blocks. Rounded up
/// to a power of two, the chunk count reveals no more than the query count would (the number
/// of blocks, up to a size class). At least `servers`, at most [`MAX_CHUNKS`] (or `servers`
/// if that is more).
pub fn chunks_for(blocks: u64, servers: usize) -> usize {
    usize::try_from(blocks)
        .ok()
        .and_then(usize::checked_next_power_of_two)
        .unwrap_or(MAX_CHUNKS)
        .clamp(servers, MAX_CHUNKS.max(servers))
}

/// Answers every request of `wanted` with the same failure.
fn fail_all(wanted: &[Wanted], message: &str) {
    for w in wanted {
        send(&apt::failure(&w.uri, message, None));
    }
}

/// Checks `bytes` against the hashes apt expects, writes them where apt asked and says
/// `201 URI Done`, or answers the failure.
fn deliver(w: &Wanted, bytes: &[u8]) {
    let sha = hex::encode(pir_keys::sha256(bytes));
    if let Err(e) = w.expected.check(bytes, &sha) {
        send(&apt::failure(&w.uri, &e, Some("HashSumMismatch")));
        return;
    }
    if let Err(e) = pir_fs::write_atomic_bytes(&w.filename, bytes) {
        send(&apt::failure(
            &w.uri,
            &format!("writing {}: {e}", w.filename.display()),
            None,
        ));
        return;
    }
    send(
        &Message::new(201, "URI Done")
            .field("URI", &w.uri)
            .field("Filename", w.filename.display())
            .field("Size", bytes.len())
            .field("SHA256-Hash", &sha)
            .field("Checksum-FileSize-Hash", bytes.len()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(servers: Option<&str>) -> Config {
        let mut message = Message::new(601, "Configuration");
        if let Some(n) = servers {
            message = message.field("Config-Item", format!("Acquire::pir::Servers={n}"));
        }
        Config::from_message(&message)
    }

    #[test]
    fn servers_default_to_three_and_must_fit_the_list() {
        assert_eq!(servers(&config(None), 5).unwrap(), 3);
        assert_eq!(servers(&config(None), 2).unwrap(), 2);
        assert_eq!(servers(&config(Some("4")), 5).unwrap(), 4);
        for bad in ["1", "6", "three", ""] {
            let error = servers(&config(Some(bad)), 5).unwrap_err().to_string();
            assert_eq!(
                error,
                format!("Acquire::pir::Servers {bad:?}: use 2 to 5 (mirrors listed)")
            );
        }
    }

    #[test]
    fn chunks_cover_the_blocks_in_a_power_of_two_within_bounds() {
        assert_eq!(chunks_for(1, 3), 3);
        assert_eq!(chunks_for(5, 3), 8);
        assert_eq!(chunks_for(8, 3), 8);
        assert_eq!(chunks_for(9, 2), 16);
        assert_eq!(chunks_for(1000, 3), MAX_CHUNKS);
        assert_eq!(chunks_for(u64::MAX, 3), MAX_CHUNKS);
        // More mirrors than the cap: one chunk each.
        assert_eq!(chunks_for(2, 20), 20);
        assert_eq!(chunks_for(100, 20), 20);
    }
}
