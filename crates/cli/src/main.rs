//! The `pir` binary: parse flags, build a validated configuration, call the libraries, map
//! errors to messages and exit codes. See `cli.rs` for the commands.

mod error;
mod records;
mod safebrowsing;
mod schemes;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Parser;
use pir_breach::command::BreachCommand;
use pir_cli::cli;
use pir_host::log::human;
use pir_keys::{PublicKey, SecretKey};

use crate::cli::{Cli, Command, DbCommand};

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
        return match command {
            BreachCommand::Bench(args) => pir_bench::breach::command::run(&args)
                .await
                .map(|()| ExitCode::SUCCESS),
            command => pir_breach::command::run(command).await,
        };
    }
    if let Command::Oram(command) = command {
        return pir_blockstore::command::run(command)
            .await
            .map(|()| ExitCode::SUCCESS);
    }
    if let Command::Safebrowsing(command) = command {
        return safebrowsing::run(command).await.map(|()| ExitCode::SUCCESS);
    }
    if let Command::Updates(command) = command {
        return pir_updates::command::run(command).await;
    }
    run_other(command).await.map(|()| ExitCode::SUCCESS)
}

async fn run_other(command: Command) -> Result<()> {
    match command {
        Command::Breach(_) | Command::Oram(_) | Command::Safebrowsing(_) => {
            bail!("internal: breach, oram and safebrowsing commands are dispatched by run")
        }
        Command::Demo(args) => pir_updates::command::demo::run(args).await,
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
        Command::Db(DbCommand::Build(args)) => records::build(&args),
        Command::Serve(args) => records::serve(&args).await,
        Command::Get(args) => records::get(&args).await,
        Command::Bench(args) => pir_bench::command::bench(args).await,
        Command::Loadtest(args) => pir_bench::command::loadtest(args).await,
        Command::Updates(_) => bail!("internal: the updates commands are dispatched by run"),
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

/// A progress bar over a download of `what` (bytes; hidden when stderr is not a terminal
/// and with `--log-format json`).
fn byte_bar(what: &str) -> indicatif::ProgressBar {
    pir_host::log::progress(
        &format!("{what} {{bar:40}} {{bytes}}/{{total_bytes}} {{eta}} left"),
        0,
        false,
    )
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
