//! The `pir breach` commands: `build`, `serve`, `servers`, `check` and `proxy` (private
//! credential checks, Günther 2019, sections 3.3, 3.4 and 4.3, with two servers and an
//! HIBP-compatible range proxy), with their flags and the settings of `pir breach serve`.
//!
//! - [`BreachCommand`] and its `...Args`: the flags (the binary parses them with clap);
//!   [`BreachServeSettings`]: the merged settings of `pir breach serve` (`pir-host`).
//! - [`run`]: one command carried out, with its output and exit code ([`CREDENTIAL_FOUND`]).
//! - [`BreachServer`]: `pir breach serve` as a `pir-host` server kind; [`start_server`] and
//!   [`open_service`]: a breach server started in this process without that life cycle
//!   (what `pir breach bench` and tests run), from a [`ServerPlan`].
//! - [`load_servers`], [`CheckReport`], [`read_line`]: the client side's pieces.
//!
//! Not here: `pir breach bench` (its driver is `pir_bench::breach`, which depends on this
//! crate; the binary dispatches it there), and the logging set-up (the binary's, through
//! `pir-host`).

use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::blind::BlindingKey;
use crate::build::{build_into, BuildOptions, Output};
use crate::corpus::BadLines;
use crate::credential::{Argon2Params, HashKind};
use crate::shard::ShardOptions;
use pir_keys::SecretKey;
use pir_service::shard::ShardMap;

mod args;
mod client;
mod serve;

pub use args::*;
pub use client::{load_servers, loopback_only, parse_database_id, read_line, CheckReport};
pub use serve::{open_service, start_server, BreachServer, ServerPlan, StartedServer};

/// Exit code of `pir breach check` when the credential was found in the corpus.
pub const CREDENTIAL_FOUND: u8 = 5;

/// Runs one `pir breach` command; returns the exit code on success. `pir breach bench` is
/// not run here (`pir_bench::breach::command::run`) and is refused.
pub async fn run(command: BreachCommand) -> Result<ExitCode> {
    match command {
        BreachCommand::Build(args) => build(&args).map(|()| ExitCode::SUCCESS),
        BreachCommand::Serve(args) => serve::serve(args).await.map(|()| ExitCode::SUCCESS),
        BreachCommand::Servers(args) => client::write_servers(&args).map(|()| ExitCode::SUCCESS),
        BreachCommand::Check(args) => client::check(&args).await,
        BreachCommand::Proxy(args) => client::proxy(&args).await.map(|()| ExitCode::SUCCESS),
        BreachCommand::Bench(_) => {
            bail!("internal: `pir breach bench` is run by pir_bench::breach::command")
        }
    }
}

/// The build options `args` ask for (the blinding key file, if any, read).
pub fn build_options(args: &BreachBuildArgs) -> Result<BuildOptions> {
    let mut options = BuildOptions::new(args.format.into());
    options.prefix_bits = args.prefix_bits;
    options.credential_hash = match args.credential_hash {
        CredentialHashArg::Sha256 => HashKind::Sha256,
        CredentialHashArg::Argon2id => HashKind::Argon2id(Argon2Params {
            memory_kib: args.argon2_memory_kib,
            iterations: args.argon2_iterations,
            ..Argon2Params::DEFAULT
        }),
    };
    if args.skip_bad_lines {
        options.bad_lines = BadLines::Skip;
    }
    if let Some(path) = &args.blinding_key {
        options.blinding_key = Some(BlindingKey::load(path)?);
    }
    options.created_unix = args.created_unix;
    options.window_entries =
        args.memory_mib.saturating_mul(1 << 20) / crate::build::shard_build::BYTES_PER_HELD_ENTRY;
    Ok(options)
}

/// `pir breach build`.
fn build(args: &BreachBuildArgs) -> Result<()> {
    let options = build_options(args)?;
    let map_key = map_key(args, &options)?;
    let output = match (args.shards, &map_key) {
        (Some(shards), Some(key)) => Output::Shards {
            dir: &args.out,
            options: ShardOptions {
                shards,
                only: args.shard,
            },
            map_key: key,
        },
        _ => Output::File(&args.out),
    };
    // Hidden with --quiet, with JSON logs, and when standard error is not a terminal.
    let bar = pir_host::log::progress(
        "reading {bar:40} {bytes}/{total_bytes} {eta} left",
        0,
        args.quiet,
    );
    let built = build_into(
        &args.input,
        output,
        &options,
        &mut rand::rng(),
        &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        },
    );
    bar.finish_and_clear();
    let (report, map) = built.with_context(|| format!("building from {}", args.input.display()))?;
    println!(
        "database {} ({} corpus, {})",
        args.out.display(),
        options.format.name(),
        report.header.hash.describe()
    );
    println!("{}", report.summary());
    if let (Some(map), Some(key)) = (map, map_key) {
        print_shards(&args.out, &map, args.shard, &key);
    }
    Ok(())
}

/// The key that signs the shard map of a sharded build (`None` for one file); refuses a
/// `--shard K` build that other processes could not repeat exactly.
fn map_key(args: &BreachBuildArgs, options: &BuildOptions) -> Result<Option<SecretKey>> {
    if args.shards.is_none() {
        return Ok(None);
    }
    if args.shard.is_some() {
        let missing = [
            (args.key.is_none(), "--key MAP.key"),
            (args.created_unix.is_none(), "--created-unix"),
            (
                !options.format.is_sha1() && options.blinding_key.is_none(),
                "--blinding-key",
            ),
        ];
        if let Some((_, flag)) = missing.iter().find(|(absent, _)| *absent) {
            bail!(
                "--shard builds one part of a database that other processes build too: give \
                 {flag} (the same in every process)"
            );
        }
    }
    Ok(Some(match &args.key {
        Some(path) => {
            SecretKey::load(path).with_context(|| format!("reading {}", path.display()))?
        }
        None => SecretKey::generate()?,
    }))
}

/// What a sharded build wrote.
fn print_shards(dir: &std::path::Path, map: &ShardMap, only: Option<usize>, key: &SecretKey) {
    for shard in &map.shards {
        let k = usize::from(shard.id);
        let written = only.is_none_or(|only| only == k);
        println!(
            "  shard {k}: buckets {} to {}{}",
            shard.first_row,
            shard.first_row + shard.rows - 1,
            if written {
                format!(" ({})", crate::shard::part_path(dir, k).display())
            } else {
                " (written by its own process)".to_string()
            }
        );
    }
    println!(
        "shard map {} signed by {} (pin it with `pir front serve --map-key`)",
        dir.join(crate::shard::MAP_FILE).display(),
        key.public().fingerprint()
    );
}
