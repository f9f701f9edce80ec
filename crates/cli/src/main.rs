//! The `pir` binary: parse flags, set up logging and the async runtime, hand each command to
//! the library that carries it out, and map errors to messages and exit codes. The commands'
//! flags and logic live in the applications' `command` modules (see `cli` for the list).

mod error;
mod schemes;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use pir_breach::command::BreachCommand;
use pir_cli::cli;
use pir_keys::{PublicKey, SecretKey};
use pir_updates::command::{ReleaseCommand, UpdatesCommand};

use crate::cli::{Cli, Command, KeygenArgs};

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

/// Carries out `command`: the applications' commands in their libraries, the rest here.
async fn run(command: Command) -> Result<ExitCode> {
    let done = match command {
        Command::Updates(UpdatesCommand::Release(ReleaseCommand::Tune(args))) => {
            pir_bench::tune::run(&args)
        }
        Command::Updates(command) => return pir_updates::command::run(command).await,
        Command::Breach(BreachCommand::Bench(args)) => pir_bench::breach::command::run(&args).await,
        Command::Breach(command) => return pir_breach::command::run(command).await,
        Command::Demo(args) => pir_updates::command::demo::run(args).await,
        Command::Records(command) => pir_records::command::run(command).await,
        Command::Oram(command) => pir_blockstore::command::run(command).await,
        Command::Safebrowsing(command) => pir_safebrowsing::command::run(command).await,
        Command::Bench(args) => pir_bench::command::bench(args).await,
        Command::Loadtest(args) => pir_bench::command::loadtest(args).await,
        Command::Schemes { markdown } => schemes::run(markdown),
        Command::Keygen(args) => keygen(&args),
        Command::Completions { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "pir", &mut script);
            write_stdout(&script)
        }
        Command::Man => {
            let page = clap_mangen::Man::new(<Cli as clap::CommandFactory>::command());
            let mut roff = Vec::new();
            page.render(&mut roff).context("rendering the man page")?;
            write_stdout(&roff)
        }
    };
    done.map(|()| ExitCode::SUCCESS)
}

/// `pir keygen`: a new key pair, or the TLS pin of a public key.
fn keygen(args: &KeygenArgs) -> Result<()> {
    match (&args.out, &args.show_pin) {
        (Some(out), _) => new_key_pair(out),
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
        (None, None) => bail!("give --out NAME or --show-pin KEY.pub"),
    }
}

fn new_key_pair(out: &Path) -> Result<()> {
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
