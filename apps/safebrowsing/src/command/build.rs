//! `pir safebrowsing build`: a list database from a blocklist, or (`--update`) its next
//! version as one waterfall step.

use std::path::Path;

use anyhow::{Context, Result};

use super::{open_database, SbBuildArgs};
use crate::list::{BuildReport, ListDatabase, UpdateReport};

/// `pir safebrowsing build`.
pub(super) fn build(args: &SbBuildArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.list)
        .with_context(|| format!("reading the list {}", args.list.display()))?;
    let (db, report) = if args.update {
        update(args, &text)?
    } else {
        ListDatabase::build_with(&list_name(args), &text, args.bucket_base)
            .with_context(|| format!("building from {}", args.list.display()))?
    };
    pir_fs::write_atomic_bytes(&args.out, &db.encode())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("{}", database_summary(&args.out, &db, &report));
    if report.skipped_count > 0 {
        println!(
            "skipped {} lines that are not URLs or hosts:",
            report.skipped_count
        );
        for (line, why) in &report.skipped {
            println!("  line {line}: {why}");
        }
    }
    if args.update {
        println!("serve it: send the servers SIGHUP (kill -HUP PID) or restart them");
    }
    Ok(())
}

/// The next version of the database at `--out` from `text` (the whole new list).
fn update(args: &SbBuildArgs, text: &str) -> Result<(ListDatabase, BuildReport)> {
    let old = open_database(&args.out).context(
        "--update makes the next version of an existing database: build it first without \
         --update",
    )?;
    let (db, report, step) = old
        .update(text)
        .with_context(|| format!("updating from {}", args.list.display()))?;
    println!("{}", update_summary(&db, &step));
    Ok((db, report))
}

/// The list's name: `--name`, else the list's file name.
fn list_name(args: &SbBuildArgs) -> String {
    match &args.name {
        Some(name) => name.clone(),
        None => args
            .list
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "list".into()),
    }
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
        "version {} of list {:?}: {} added, {} removed; {} bucket(s) made, {} dropped; a \
         client fetches hints for {hinted} records ({:.1} % of re-hinting all {}) and looks \
         up {by_dpf} by DPF",
        db.version(),
        db.name(),
        step.added,
        step.removed,
        step.created.len(),
        step.dropped.len(),
        100.0 * hinted as f64 / db.len().max(1) as f64,
        db.len()
    )
}

/// The line `build` prints about the database it wrote to `out`.
fn database_summary(out: &Path, db: &ListDatabase, report: &BuildReport) -> String {
    let buckets = db.buckets();
    format!(
        "database {} (list {:?}, version {}): {} full hashes from {} entries ({} duplicates) in \
         {} bucket(s) of {} records (DPF below {}); id {}",
        out.display(),
        db.name(),
        db.version(),
        db.len(),
        report.entries,
        report.duplicates,
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
            line.starts_with("version 1 of list \"test\": 20 added, 10 removed;"),
            "{line}"
        );
        assert!(line.contains("hints for 0 records"), "{line}");
        assert!(line.contains("looks up 20 by DPF"), "{line}");
    }

    #[test]
    fn the_list_is_named_after_its_file_unless_named() {
        let mut args = SbBuildArgs {
            list: "/lists/malware.txt".into(),
            out: "db".into(),
            name: None,
            update: false,
            bucket_base: None,
        };
        assert_eq!(list_name(&args), "malware.txt");
        args.name = Some("mine".into());
        assert_eq!(list_name(&args), "mine");
    }

    #[test]
    fn a_database_summary_names_its_buckets() {
        let (db, report) = ListDatabase::build_with("test", &hosts(0..300), Some(256)).unwrap();
        let line = database_summary(Path::new("sb.db"), &db, &report);
        assert!(line.starts_with("database sb.db (list \"test\", version 0): 300 full hashes from 300 entries (0 duplicates)"), "{line}");
    }
}
