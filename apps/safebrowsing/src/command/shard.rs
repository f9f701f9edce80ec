//! `pir safebrowsing build --shards S`: every shard at once (the whole database in memory),
//! one shard in bounded memory (`--shard K`, `crate::shard_build`), or the next version of a
//! sharded directory (`--update`). The servers of a sharded database are in `shard_serve`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use pir_keys::SecretKey;
use pir_service::shard::map::{part_path, ShardOptions};
use pir_service::shard::ShardMap;

use super::SbBuildArgs;
use crate::list::{ListDatabase, Reports, Threat};
use crate::shard;

/// `--shards S`, `--shard K` and `--key MAP.key` of `args`: the options and the map's key.
fn shard_options(args: &SbBuildArgs) -> Result<(ShardOptions, SecretKey)> {
    let Some(shards) = args.shards else {
        bail!("--shard and --key go with --shards S");
    };
    let Some(key) = &args.key else {
        bail!("--shards needs --key MAP.key: the key that signs the shard map");
    };
    let key = SecretKey::load(key).with_context(|| format!("reading {}", key.display()))?;
    let options = ShardOptions {
        shards: usize::from(shards),
        only: args.shard,
    };
    Ok((options, key))
}

/// `pir safebrowsing build --shards S --shard K --key MAP.key --out DIR` of the lists
/// `files`: shard K alone, in bounded memory (`crate::shard_build`).
pub(super) fn build_one(args: &SbBuildArgs, files: &[(Threat, PathBuf)], name: &str) -> Result<()> {
    let (options, key) = shard_options(args)?;
    let built = crate::shard_build::build_part(
        &args.out,
        name,
        files,
        args.bucket_base,
        options,
        &key,
        crate::shard_build::DEFAULT_WINDOW_ENTRIES,
    )?;
    let lists: Vec<String> = built
        .reports
        .iter()
        .zip(&built.counts)
        .map(|((threat, report), (_, n))| {
            format!(
                "{threat} {n} from {} entries ({} duplicates)",
                report.entries, report.duplicates
            )
        })
        .collect();
    println!(
        "database {} (list {name:?}, version 0): {} full hashes ({}) in 1 bucket (DPF below \
         {}); id {}; built in {} window(s) of at most {} entries",
        args.out.display(),
        built.map.rows,
        lists.join("; "),
        built.base.saturating_mul(4),
        hex::encode(&built.map.database_id[..8]),
        built.windows,
        built.peak_window_entries
    );
    for ((threat, report), (_, path)) in built.reports.iter().zip(files) {
        if report.skipped_count > 0 {
            println!(
                "skipped {} lines of the {threat} list {} that are not URLs or hosts:",
                report.skipped_count,
                path.display()
            );
            for (line, why) in &report.skipped {
                println!("  line {line}: {why}");
            }
        }
    }
    print_map(args, &built.map, name, 0, &key);
    Ok(())
}

/// `pir safebrowsing build --shards S [--shard K] --key MAP.key --out DIR` of `db`.
pub(super) fn build(args: &SbBuildArgs, db: &ListDatabase) -> Result<()> {
    let (options, key) = shard_options(args)?;
    let map = shard::write(&args.out, db, options, &key)?;
    print_map(args, &map, db.name(), db.version(), &key);
    Ok(())
}

/// `pir safebrowsing build --update --shards S --key MAP.key --out DIR`: the next version of
/// the sharded database in `DIR` from `sources` (each the whole new list), as `--update` of a
/// database file makes it; only the shards whose rows change are written again, then the
/// index and a new map signed by `MAP.key` (which must have signed the one in `DIR`).
pub(super) fn update(
    args: &SbBuildArgs,
    sources: &[(Threat, &str)],
) -> Result<(ListDatabase, Reports)> {
    if args.shard.is_some() {
        bail!(
            "--update writes every shard whose rows change: give --shards S without --shard \
             (where the whole directory is)"
        );
    }
    let (options, key) = shard_options(args)?;
    let old = shard::read_map(&args.out, Some(&key.public())).context(
        "--update makes the next version of an existing sharded database, whose map --key \
         signed: build it first without --update",
    )?;
    if old.shards.len() != options.shards {
        bail!(
            "{} holds {} shards, not {}: an update keeps the shard count (build a new \
             directory to change it)",
            args.out.display(),
            old.shards.len(),
            options.shards
        );
    }
    let before = shard::read_database(&args.out, &old)?;
    let (db, reports, step) = before
        .update_lists(sources)
        .context("updating the database")?;
    println!("{}", super::update_summary(&db, &step));
    let (map, written) = shard::write_update(&args.out, &db, &old, &key)?;
    println!(
        "shards written again: {} of {} (the others' rows did not change)",
        if written.is_empty() {
            "none".to_string()
        } else {
            written
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        },
        map.shards.len()
    );
    print_map(args, &map, db.name(), db.version(), &key);
    Ok((db, reports))
}

/// What a sharded build prints of the map it wrote.
fn print_map(args: &SbBuildArgs, map: &ShardMap, name: &str, version: u64, key: &SecretKey) {
    println!(
        "sharded database {} (list {:?}, version {}): {} records of every bucket in {} shards \
         (database {})",
        args.out.display(),
        name,
        version,
        map.rows,
        map.shards.len(),
        hex::encode(&map.database_id[..8])
    );
    for entry in &map.shards {
        let k = usize::from(entry.id);
        let written = args.shard.is_none_or(|only| only == k);
        println!(
            "  shard {k}: records {} to {}{}",
            entry.first_row,
            entry.first_row + entry.rows - 1,
            if written {
                format!(" ({})", part_path(&args.out, k).display())
            } else {
                String::new()
            }
        );
    }
    println!(
        "shard map signed by {} (pin it with `pir front serve --map-key`)",
        key.public().fingerprint()
    );
}
