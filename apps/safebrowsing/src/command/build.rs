//! `pir safebrowsing build`: a database of one or more lists (one file per threat), or
//! (`--update`) its next version as one waterfall step.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use pir_core::Codec;

use super::{open_database, update_summary, SbBuildArgs};
use crate::list::{BuildReport, ListDatabase, Threat};

/// `pir safebrowsing build`.
pub(super) fn build(args: &SbBuildArgs) -> Result<()> {
    let files = list_files(args)?;
    if let (Some(_), Some(_), false) = (args.shards, args.shard, args.update) {
        // One shard in bounded memory: the lists are streamed, never held whole.
        return super::shard::build_one(args, &files, &database_name(args, &files));
    }
    let texts = files
        .iter()
        .map(|(threat, path)| {
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the {threat} list {}", path.display()))
        })
        .collect::<Result<Vec<String>>>()?;
    let sources: Vec<(Threat, &str)> = files
        .iter()
        .zip(&texts)
        .map(|((threat, _), text)| (*threat, text.as_str()))
        .collect();
    let (db, reports) = if args.update && args.shards.is_some() {
        // Writes the shards that change, then the index and the map.
        super::shard::update(args, &sources)?
    } else if args.update {
        update(args, &sources)?
    } else {
        ListDatabase::build_lists(&database_name(args, &files), &sources, args.bucket_base)
            .context("building the database")?
    };
    if args.shards.is_some() {
        if !args.update {
            super::shard::build(args, &db)?;
        }
    } else {
        pir_fs::write_atomic_bytes(&args.out, &db.to_bytes())
            .with_context(|| format!("writing {}", args.out.display()))?;
    }
    println!("{}", database_summary(&args.out, &db, &reports));
    for ((threat, path), (_, report)) in files.iter().zip(&reports) {
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
    println!("{}", super::lists_line(&db));
    if args.update {
        println!("serve it: send the servers SIGHUP (kill -HUP PID) or restart them");
    }
    Ok(())
}

/// The lists to read: the positional LIST as malware, then each `--threat`.
fn list_files(args: &SbBuildArgs) -> Result<Vec<(Threat, PathBuf)>> {
    let mut files: Vec<(Threat, PathBuf)> = args
        .list
        .iter()
        .map(|path| (Threat::Malware, path.clone()))
        .collect();
    files.extend(args.threats.iter().cloned());
    for (k, (threat, _)) in files.iter().enumerate() {
        if files[..k].iter().any(|(t, _)| t == threat) {
            bail!(
                "the {threat} list is given twice (a positional LIST is the malware list): give \
                 one file per list"
            );
        }
    }
    if files.is_empty() {
        bail!("give the lists: --threat malware=FILE --threat phishing=FILE ...");
    }
    Ok(files)
}

/// The next version of the database at `--out` from `sources` (each the whole new list).
fn update(
    args: &SbBuildArgs,
    sources: &[(Threat, &str)],
) -> Result<(ListDatabase, Vec<(Threat, BuildReport)>)> {
    let old = open_database(&args.out).context(
        "--update makes the next version of an existing database: build it first without \
         --update",
    )?;
    let (db, reports, step) = old.update_lists(sources).context("updating the database")?;
    println!("{}", update_summary(&db, &step));
    Ok((db, reports))
}

/// The database's name: `--name`, else the first list's file name.
fn database_name(args: &SbBuildArgs, files: &[(Threat, PathBuf)]) -> String {
    match &args.name {
        Some(name) => name.clone(),
        None => files
            .first()
            .and_then(|(_, path)| path.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "list".into()),
    }
}

/// The line `build` prints about the database it wrote to `out`.
fn database_summary(out: &Path, db: &ListDatabase, reports: &[(Threat, BuildReport)]) -> String {
    let buckets = db.buckets();
    let lists: Vec<String> = reports
        .iter()
        .map(|(threat, report)| {
            format!(
                "{threat} {} from {} entries ({} duplicates)",
                db.count(*threat),
                report.entries,
                report.duplicates
            )
        })
        .collect();
    format!(
        "database {} (list {:?}, version {}): {} full hashes ({}) in {} bucket(s) of {} \
         records (DPF below {}); id {}",
        out.display(),
        db.name(),
        db.version(),
        db.len(),
        lists.join("; "),
        buckets.len(),
        buckets
            .iter()
            .map(|b| b.len().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        db.dpf_below(),
        hex::encode(&db.id()[..8])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(range: std::ops::Range<usize>) -> String {
        range.map(|i| format!("host{i}.example\n")).collect()
    }

    #[test]
    fn an_update_summary_counts_the_step_and_its_hints() {
        let (old, _) = ListDatabase::build_with("test", &hosts(0..1000), Some(256)).unwrap();
        // 20 new entries, 10 gone: one new small bucket, looked up by DPF.
        let (db, _, step) = old.update(&hosts(10..1020)).unwrap();
        let line = update_summary(&db, &step);
        assert!(
            line.starts_with("version 1 of list \"test\": 20 added, 10 removed, 0 moved"),
            "{line}"
        );
        assert!(line.contains("hints for 0 records"), "{line}");
        assert!(line.contains("looks up 20 by DPF"), "{line}");
    }

    #[test]
    fn the_database_is_named_after_its_first_file_unless_named() {
        let mut args = SbBuildArgs {
            list: Some("/lists/malware.txt".into()),
            threats: vec![(Threat::Phishing, "/lists/phish.txt".into())],
            out: "db".into(),
            name: None,
            update: false,
            bucket_base: None,
            shards: None,
            shard: None,
            key: None,
        };
        let files = list_files(&args).unwrap();
        assert_eq!(files[1].0, Threat::Phishing);
        assert_eq!(database_name(&args, &files), "malware.txt");
        args.name = Some("mine".into());
        assert_eq!(database_name(&args, &files), "mine");
        args.threats
            .push((Threat::Malware, "/lists/other.txt".into()));
        let twice = list_files(&args).unwrap_err().to_string();
        assert!(twice.contains("given twice"), "{twice}");
    }

    #[test]
    fn a_database_summary_names_its_buckets() {
        let (db, report) = ListDatabase::build_with("test", &hosts(0..300), Some(256)).unwrap();
        let line = database_summary(Path::new("sb.db"), &db, &[(Threat::Malware, report)]);
        assert!(line.starts_with("database sb.db (list \"test\", version 0): 300 full hashes (malware 300 from 300 entries (0 duplicates))"), "{line}");
    }
}
