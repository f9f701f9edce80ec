//! `pir safebrowsing build --shards S`, and the Safe Browsing kinds of `pir shard serve` (one
//! replica of one shard: a release per bucket, under the bucket's part id) and `pir front
//! serve` (server 0 or 1 to the unchanged proxy: the list index in the clear, each bucket's
//! Checklist info, and every answer the XOR of the shards' checked parts).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use pir_host::Host;
use pir_keys::{PublicKey, SecretKey};
use pir_service::checklist::{download_envelope, Role};
use pir_service::shard::map::{part_path, ShardOptions};
use pir_service::shard::{Fanout, Hedge, ShardMap, XorFront};
use pir_service::{ReleaseSet, ServedRelease, SignedService};

use super::{SbBuildArgs, PRIVACY};
use crate::list::{ListDatabase, Threat};
use crate::shard::{self, About};

/// How often a front end asks every shard replica for its description (`/health`'s
/// coverage without client traffic; no pass over the records).
const PROBE_EVERY: Duration = Duration::from_secs(2);

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

/// Serves shard `k` of the Safe Browsing database in `dir` (`map` read from it).
pub async fn serve_shard(host: Host, dir: &Path, map: ShardMap, k: usize) -> Result<()> {
    let (index, _) = shard::read_index(dir, &map)?;
    let Some(entry) = map.shards.get(k).copied() else {
        bail!(
            "no shard {k}: the map has shards 0 to {}",
            map.shards.len() - 1
        );
    };
    let path = part_path(dir, k);
    let size = std::fs::metadata(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    if Some(size) != entry.rows.checked_mul(u64::from(map.row_bytes)) {
        bail!("{} is not shard {k}'s part (wrong size)", path.display());
    }
    let part = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let backends = shard::shard_backends(&index, &map, k, &part)
        .with_context(|| format!("{}", path.display()))?;
    drop(part);
    let releases = backends
        .into_iter()
        .map(|(info, backend)| {
            let service =
                SignedService::new(backend, host.key_copy()?).with_metrics(host.metrics.clone());
            Ok(ServedRelease::new(info, Arc::new(service)))
        })
        .collect::<Result<Vec<_>>>()?;
    let buckets = releases.len();
    let set = Arc::new(ReleaseSet::new(releases, host.metrics.clone())?);
    let about = About::decode(&map.about)?;
    pir_host::serve_static(host, set, "the shard", |running, key| {
        vec![format!(
            "serving shard {k} (records {} to {}) of list {:?} version {} ({buckets} \
             bucket(s), database {}) at https://{} (key {})",
            entry.first_row,
            entry.first_row + entry.rows - 1,
            about.name,
            about.version,
            hex::encode(&map.database_id[..8]),
            running.addr,
            key.public().fingerprint()
        )]
    })
    .await
}

/// Serves Safe Browsing server `server` (0 offline, 1 online) of the database in `dir` over
/// `fanout` to its shards (the replicas' `keys`).
pub async fn serve_front<F: Fanout>(
    host: Host,
    dir: &Path,
    map: ShardMap,
    keys: Vec<Vec<PublicKey>>,
    fanout: F,
    hedge: Hedge,
    server: u16,
) -> Result<()> {
    let role = Role::of(usize::from(server))?;
    let (index, index_bytes) = shard::read_index(dir, &map)?;
    let xor = Arc::new(XorFront::new(map.clone(), keys, Vec::new(), fanout)?.with_hedge(hedge));
    let releases = shard::front_backends(&index, &map, role, &xor)?
        .into_iter()
        .map(|(info, backend)| {
            let service =
                SignedService::new(backend, host.key_copy()?).with_metrics(host.metrics.clone());
            Ok(ServedRelease::new(info, Arc::new(service)))
        })
        .collect::<Result<Vec<_>>>()?;
    let set = Arc::new(ReleaseSet::new(releases, host.metrics.clone())?);
    if role == Role::Offline {
        set.set_download(Some(download_envelope(&index_bytes)));
    }
    keep_probing(&xor);
    let about = About::decode(&map.about)?;
    let (shards, buckets) = (map.shards.len(), index.buckets().len());
    pir_host::serve_static(host, set, "the front end", |running, key| {
        vec![
            format!(
                "safebrowsing server {server} ({}) serving list {:?} version {}: {buckets} \
                 bucket(s) from {shards} shards, database {} at https://{} with key {}",
                if role == Role::Offline {
                    "offline: hints, refreshes, list index"
                } else {
                    "online: lookups"
                },
                about.name,
                about.version,
                hex::encode(&map.database_id[..8]),
                running.addr,
                key.public().fingerprint()
            ),
            format!("privacy: {PRIVACY}"),
        ]
    })
    .await
}

/// Probes every replica every [`PROBE_EVERY`] while the front end lives.
fn keep_probing<F: Fanout>(xor: &Arc<XorFront<F>>) {
    let probed = Arc::downgrade(xor);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PROBE_EVERY);
        loop {
            every.tick().await;
            match probed.upgrade() {
                Some(xor) => xor.probe(),
                None => break,
            }
        }
    });
}
