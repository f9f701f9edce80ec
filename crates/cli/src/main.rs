//! The `pir` binary: parse flags, build a validated configuration, call the libraries, map
//! errors to messages and exit codes. See `cli.rs` for the commands.

mod apt;
mod bench;
mod breach;
mod demo;
mod error;
mod loadtest;
mod mirror;
mod oram;
mod schemes;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use pir_cli::cli;
use pir_host::log::human;
use pir_keys::{PublicKey, SecretKey};
use pir_updates::fetch::SchemeChoice;
use pir_updates::{release, Manifest, MirrorList};

use crate::cli::{
    Cli, Command, EvidenceCommand, MirrorCommand, MirrorListCommand, ReleaseCommand, SchemeArg,
};

fn main() -> ExitCode {
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    pir_host::log::init(
        &cli.log,
        match cli.log_format {
            cli::LogFormat::Json => pir_host::log::Format::Json,
            cli::LogFormat::Plain => pir_host::log::Format::Plain,
        },
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return error::report(&anyhow::Error::new(e).context("cannot start the async runtime"))
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => error::report(&e),
    }
}

async fn run(command: Command) -> Result<ExitCode> {
    if let Command::Breach(command) = command {
        return breach::run(command).await;
    }
    if let Command::Oram(command) = command {
        return oram::run(command).await.map(|()| ExitCode::SUCCESS);
    }
    if let Command::Safebrowsing(command) = command {
        return pir_safebrowsing::command::run(command)
            .await
            .map(|()| ExitCode::SUCCESS);
    }
    if let Command::Records(command) = command {
        return pir_records::command::run(command)
            .await
            .map(|()| ExitCode::SUCCESS);
    }
    if let Command::Apt(apt_command) = &command {
        return match apt_command {
            cli::AptCommand::InstallMethod { dir } => apt::install_method(dir),
            cli::AptCommand::Method => apt::method().await,
        }
        .map(|()| ExitCode::SUCCESS);
    }
    if let Command::Evidence(EvidenceCommand::Check(args)) = &command {
        return check_evidence(&args.evidence, &args.release);
    }
    run_other(command).await.map(|()| ExitCode::SUCCESS)
}

async fn run_other(command: Command) -> Result<()> {
    match command {
        Command::Breach(_) | Command::Oram(_) | Command::Safebrowsing(_) | Command::Records(_) => {
            bail!("internal: breach, oram, safebrowsing and records commands are dispatched by run")
        }
        Command::Demo(args) => demo::run(args).await,
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "pir", &mut script);
            write_stdout(&script)
        }
        Command::Schemes { markdown } => schemes::run(markdown),
        Command::Man => {
            let page = clap_mangen::Man::new(<Cli as clap::CommandFactory>::command());
            let mut roff = Vec::new();
            page.render(&mut roff).context("rendering the man page")?;
            write_stdout(&roff)
        }
        Command::Keygen(args) => match (&args.out, &args.show_pin) {
            (Some(out), _) => keygen(out),
            (None, Some(public)) => {
                let key = PublicKey::load(public)?;
                println!("{}", key.tls_pin());
                eprintln!(
                    "curl --insecure --pinnedpubkey {} https://HOST:PORT/metrics  (--insecure \
                     skips certificate authorities; the pin checks the server)",
                    key.tls_pin()
                );
                Ok(())
            }
            (None, None) => anyhow::bail!("give --out NAME or --show-pin KEY.pub"),
        },
        Command::Release(ReleaseCommand::Build(args)) => {
            let key = SecretKey::load(&args.key)?;
            let options = release::BuildOptions {
                block_size: args.block_size,
                size_classes: args.size_classes,
                progress: !args.quiet,
                release_version: args.release_version,
                valid_seconds: args.valid_days.map(|days| (days * 86400.0) as u64),
            };
            let report = release::build(&args.dir, &key, &args.out, &options)
                .with_context(|| format!("building a release from {}", args.dir.display()))?;
            println!(
                "release {}: {} files, {} bytes of payload in {} blocks of {} bytes ({} bytes)",
                args.out.display(),
                report.files,
                report.payload_bytes,
                report.block_count,
                report.block_size,
                report.database_bytes
            );
            println!("block size: {}", report.block_size_reason);
            Ok(())
        }
        Command::Release(ReleaseCommand::Show(args)) => {
            show_release(&args.release, args.vendor_pub.as_deref())
        }
        Command::Mirror(MirrorCommand::Serve(args)) => mirror::serve(args).await,
        Command::MirrorList(MirrorListCommand::Build(args)) => {
            let vendor = SecretKey::load(&args.vendor_key)?;
            let mirrors = args
                .mirrors
                .iter()
                .map(|arg| pir_updates::mirrors::parse_mirror_arg(arg))
                .collect::<Result<Vec<_>, _>>()?;
            let list = MirrorList {
                created_unix: unix_now(),
                mirrors,
            };
            let bytes = list.encode_signed(&vendor);
            MirrorList::decode_verified(&bytes, &vendor.public())
                .context("the list we just signed does not verify")?;
            pir_fs::write_atomic_bytes(&args.out, &bytes)
                .with_context(|| format!("writing {}", args.out.display()))?;
            println!(
                "mirror list {}: {} mirrors, signed by vendor key {}",
                args.out.display(),
                list.mirrors.len(),
                vendor.public().fingerprint()
            );
            Ok(())
        }
        Command::Fetch(args) => {
            let vendor = PublicKey::load(&args.vendor_pub)?;
            let listed = pir_updates::fetch::load_mirror_list(&args.mirrors, &vendor)?.len();
            let servers = args.servers.unwrap_or(listed.min(3));
            if servers > listed {
                bail!("--servers {servers} but the mirror list has only {listed} mirrors");
            }
            let to_stdout = args.out == Path::new(pir_updates::fetch::STDOUT);
            if to_stdout && args.json {
                bail!("--json and --out - both want standard output: write the file somewhere");
            }
            if args.scheme == SchemeArg::Dpf && args.servers.is_some_and(|n| n != 2) {
                bail!("--scheme dpf asks exactly 2 mirrors; leave out --servers");
            }
            let choice = match args.scheme {
                SchemeArg::Dpf => SchemeChoice::Dpf,
                SchemeArg::Chor => SchemeChoice::Chor { servers },
                SchemeArg::RaidPir => SchemeChoice::RaidPir {
                    servers,
                    redundancy: args.redundancy,
                    chunks: args.chunks.unwrap_or(servers),
                },
            };
            let state_dir = pir_updates::freshness::state_dir(args.state_dir.as_deref())?;
            let (fetched, evidence) = pir_updates::fetch::fetch_to_file(
                &args.name,
                &args.mirrors,
                &vendor,
                &state_dir,
                &args.out,
                choice,
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
            let sent: u64 = fetched.stats.iter().map(|s| s.bytes_sent).sum();
            let received: u64 = fetched.stats.iter().map(|s| s.bytes_received).sum();
            if args.json {
                let incidents: Vec<serde_json::Value> = fetched
                    .incidents
                    .iter()
                    .map(|i| serde_json::json!({ "mirror": i.url, "what": i.what }))
                    .collect();
                let report = serde_json::json!({
                    "name": args.name,
                    "out": args.out,
                    "bytes": fetched.bytes.len(),
                    "blocks": fetched.blocks,
                    "queries_per_mirror": fetched.queries,
                    "bytes_sent": sent,
                    "bytes_received": received,
                    "milliseconds": fetched.elapsed.as_secs_f64() * 1e3,
                    "incidents": incidents,
                    "evidence": evidence,
                    "privacy": choice.assumption(),
                });
                println!("{report}");
                return Ok(());
            }
            let summary = format!(
                "fetched {} -> {} ({} bytes, {} blocks, {} quer{} per mirror, {} bytes sent, {} received, {:.1} ms)\nprivacy: {}",
                args.name,
                args.out.display(),
                fetched.bytes.len(),
                fetched.blocks,
                fetched.queries,
                if fetched.queries == 1 { "y" } else { "ies" },
                sent,
                received,
                fetched.elapsed.as_secs_f64() * 1e3,
                choice.assumption()
            );
            // With `--out -` standard output is the file itself.
            if to_stdout {
                eprintln!("{summary}");
            } else {
                println!("{summary}");
            }
            Ok(())
        }
        Command::Bench(args) if args.oram => oram::bench(args).await,
        Command::Bench(args) => bench::bench(&args),
        Command::Loadtest(args) => loadtest::run(&args).await,
        Command::Evidence(_) | Command::Apt(_) => {
            bail!("internal: evidence and apt commands are dispatched by run")
        }
    }
}

fn keygen(out: &Path) -> Result<()> {
    let key = SecretKey::generate()?;
    let secret = out.with_extension("key");
    let public = out.with_extension("pub");
    if public.exists() {
        bail!("{} already exists; choose another name", public.display());
    }
    // Both files are written whole or not at all (pir-fs); if the public key cannot be
    // written, the new secret key is removed too, so the same command can be run again.
    key.save(&secret)?;
    if let Err(e) = key.public().save(&public) {
        let _ = std::fs::remove_file(&secret);
        return Err(e.into());
    }
    println!(
        "wrote {} (secret, keep it private) and {} (fingerprint {})",
        secret.display(),
        public.display(),
        key.public().fingerprint()
    );
    Ok(())
}

fn show_release(dir: &Path, vendor_pub: Option<&Path>) -> Result<()> {
    let path = dir.join(release::MANIFEST_FILE);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let manifest = match vendor_pub {
        Some(pub_path) => Manifest::decode_verified(&bytes, &PublicKey::load(pub_path)?)?,
        None => Manifest::decode_unverified(&bytes)?,
    };
    println!("release id  {}", hex::encode(Manifest::release_id(&bytes)));
    println!(
        "signature   {}",
        if vendor_pub.is_some() {
            "verified"
        } else {
            "not checked (pass --vendor-pub)"
        }
    );
    println!(
        "blocks      {} x {} bytes",
        manifest.block_count, manifest.block_size
    );
    println!("version     {}", manifest.release_version);
    println!(
        "expires     {} ({})",
        manifest.expires_unix,
        pir_updates::freshness::describe_expiry(manifest.expires_unix, unix_now())
    );
    println!("files       {}", manifest.files.len());
    for file in &manifest.files {
        println!(
            "  {:>12} bytes  {:>6} blocks  {}",
            file.size, file.block_count, file.name
        );
    }
    Ok(())
}

/// `pir evidence check`: verifies the local release copy (every block against the signed
/// manifest), then recomputes the mirror's answers from it. Exit codes in [`error`].
fn check_evidence(path: &Path, release_dir: &Path) -> Result<ExitCode> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let evidence = pir_client::Evidence::decode(&bytes)
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
    Ok(
        match pir_client::evidence::check(&evidence, &release.database)? {
            pir_client::Verdict::Cheated { query } => {
                println!(
                "CHEATED: mirror {} (key {}) signed a wrong answer to query {query} of the batch",
                evidence.url,
                evidence.key.fingerprint()
            );
                ExitCode::from(error::EVIDENCE_CHEATED)
            }
            pir_client::Verdict::Correct => {
                println!(
                    "correct: every answer mirror {} signed is right",
                    evidence.url
                );
                ExitCode::SUCCESS
            }
            pir_client::Verdict::NotSigned => {
                println!(
                    "not signed by mirror {}'s key: proves nothing about it",
                    evidence.url
                );
                ExitCode::from(error::EVIDENCE_NOT_SIGNED)
            }
        },
    )
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Writes `bytes` to standard output; a reader that went away early is not an error.
fn write_stdout(bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to standard output"),
    }
}

/// A reader that stops early (`pir release show ... | head -1`) closes our standard output;
/// the next `println!` then fails with a broken pipe. That is how pipelines end, not an
/// error: exit quietly instead of printing a panic and a backtrace. Every other panic keeps
/// the default report.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}
