//! The vendor's commands: `pir release build`, `pir release show` and `pir mirror-list build`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use pir_keys::{PublicKey, SecretKey};

use crate::freshness::{describe_expiry, now_unix};
use crate::release_shards::ShardOptions;
use crate::{release, Manifest, MirrorList};

/// `pir release ...`.
#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// Pack every file under DIR into a release (database + signed manifest).
    ///
    /// Files are packed in byte order of their relative paths, each starting on a block
    /// boundary. Block size rule (override with --block-size): the largest power of two from
    /// 64 B to 1 MiB whose padding adds at most 10% to the release (upPIR section 5.4: every
    /// block fetched costs one full scan, so bigger blocks fetch faster).
    ///
    /// A Debian repository (dists/ + pool/ from apt-ftparchive or reprepro, or a flat one) is
    /// packed byte for byte, so apt's own signed index stays valid; when the tree holds
    /// packages (.deb, .udeb, .ddeb), the block-size rule and --size-classes apply to them
    /// only, not to the indices every client fetches alike.
    Build(ReleaseBuildArgs),
    /// Print a release's manifest summary.
    Show(ReleaseShowArgs),
    /// Measure which block size suits a release on this machine (upPIR section 5.4).
    ///
    /// The release's files are packed again, in memory, at every power-of-two block size from
    /// --min-block to --max-block, and every file is fetched privately (RAID-PIR, as pir fetch
    /// does with 3 mirrors: query generation, each mirror's answer, decoding; no network).
    /// Goodput is the file bytes fetched per second of that work, counting the slowest mirror
    /// (mirrors answer in parallel); data efficiency is the file bytes over every byte moved
    /// (queries and answers, whose blocks carry the files' padding). Prints the table, writes
    /// a PNG chart, and recommends the block size with the largest goodput among those whose
    /// efficiency is within 10% of the best measured (bigger blocks scan faster but pad more,
    /// and mirrors pay for every byte moved), as the `pir release build --block-size` flag.
    Tune(ReleaseTuneArgs),
}

/// `pir release tune` (carried out by `pir_bench::tune`, the binary dispatches it there).
#[derive(Debug, Args)]
pub struct ReleaseTuneArgs {
    /// A release built by `pir release build`: its files are measured.
    pub dir: PathBuf,
    /// Smallest block size measured, bytes (a power of two, at least 1 KiB).
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    pub min_block: usize,
    /// Largest block size measured, bytes (a power of two, at most 8 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = 8 << 20)]
    pub max_block: usize,
    /// Seconds of fetching per block size: passes over every file are repeated until this
    /// time is spent (at least one pass).
    #[arg(
        long,
        value_name = "S",
        default_value_t = 2.0,
        conflicts_with = "rounds"
    )]
    pub seconds: f64,
    /// Exactly this many passes over every file per block size, instead of --seconds.
    #[arg(long, value_name = "N")]
    pub rounds: Option<u32>,
    /// Pad every file to a power-of-two number of blocks, as `pir release build
    /// --size-classes` does.
    #[arg(long)]
    pub size_classes: bool,
    /// Write the chart here (PNG; default: tune.png in the current directory).
    #[arg(long, value_name = "FILE", default_value = "tune.png")]
    pub plot: PathBuf,
    /// Print the measurements as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `pir release build`.
#[derive(Debug, Args)]
pub struct ReleaseBuildArgs {
    /// Directory whose files make the release.
    pub dir: PathBuf,
    /// The vendor's secret key (from `pir keygen`).
    #[arg(long, value_name = "VENDOR.key")]
    pub key: PathBuf,
    /// Output directory (must not exist, or be empty).
    #[arg(long, value_name = "RELEASE")]
    pub out: PathBuf,
    /// Block size in bytes (a multiple of 64) instead of the automatic rule.
    #[arg(long, value_name = "BYTES")]
    pub block_size: Option<usize>,
    /// Pad every file to a power-of-two number of blocks so its size reveals only a class.
    #[arg(long)]
    pub size_classes: bool,
    /// Release counter signed into the manifest (default: the build time in seconds). Clients
    /// refuse a manifest with a lower one than the newest they have seen (rollback attack).
    #[arg(long, value_name = "N")]
    pub release_version: Option<u64>,
    /// Days the manifest stays valid (default 7, like Debian's security suite); clients refuse
    /// it afterwards (a mirror replaying an old manifest: freeze attack). Rebuild before then.
    #[arg(long, value_name = "DAYS", value_parser = parse_days)]
    pub valid_days: Option<f64>,
    /// Do not draw a progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Write the blocks as S shard parts and a shard map signed by the vendor key, for
    /// `pir shard serve` and `pir front serve`, instead of one database file.
    #[arg(long, value_name = "S")]
    pub shards: Option<usize>,
    /// With --shards: write only shard K's part (with the manifest and the map), so that each
    /// shard is built by its own process; every process needs the same files and the same
    /// --release-version and --created-unix.
    #[arg(long, value_name = "K", requires = "shards")]
    pub shard: Option<usize>,
    /// The manifest's creation time, seconds since 1970 (default: now). Required with
    /// --shard, so that the processes of one sharded build sign the same manifest.
    #[arg(long, value_name = "SECONDS")]
    pub created_unix: Option<u64>,
}

/// A number of days from 0.0001 (about 9 s, for tests) to 3650.
fn parse_days(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(days) if (0.0001..=3650.0).contains(&days) => Ok(days),
        _ => Err(format!(
            "{text:?} is not a number of days from 0.0001 to 3650"
        )),
    }
}

/// `pir release show`.
#[derive(Debug, Args)]
pub struct ReleaseShowArgs {
    /// The release directory.
    pub release: PathBuf,
    /// Verify the manifest signature with this vendor key.
    #[arg(long, value_name = "VENDOR.pub")]
    pub vendor_pub: Option<PathBuf>,
}

/// `pir mirror-list ...`.
#[derive(Debug, Subcommand)]
pub enum MirrorListCommand {
    /// Sign a list of mirrors (URL and key each) with the vendor key.
    Build(MirrorListBuildArgs),
}

/// `pir mirror-list build`.
#[derive(Debug, Args)]
pub struct MirrorListBuildArgs {
    /// The vendor's secret key.
    #[arg(long, value_name = "VENDOR.key")]
    pub vendor_key: PathBuf,
    /// A mirror as https://HOST:PORT=MIRROR.pub; repeat for each mirror. Mirrors beyond the
    /// number a query needs are spares, used when one is down or caught cheating.
    #[arg(long = "mirror", value_name = "URL=MIRROR.pub", required = true)]
    pub mirrors: Vec<String>,
    /// A chunk-only mirror (`pir mirror serve --chunks LIST/C`) as URL=LIST/C, for example
    /// https://m1.example.org:8443=0,1/4; repeat for each. Clients give it only the RAID-PIR
    /// positions whose chunks it holds.
    #[arg(long = "mirror-chunks", value_name = "URL=LIST/C")]
    pub mirror_chunks: Vec<String>,
    /// The release every listed mirror serves (its directory, from `pir release build`):
    /// recorded in the list, so that clients choose the release and its mirrors from the list
    /// without asking each mirror what it serves.
    #[arg(long, value_name = "RELEASE")]
    pub release: Option<PathBuf>,
    /// Output file.
    #[arg(long, value_name = "MIRRORS")]
    pub out: PathBuf,
    /// The list's counter (default: the build time in seconds). Clients refuse a list with a
    /// lower one than the newest they have used (a replayed list bringing back dropped
    /// mirrors: rollback attack).
    #[arg(long, value_name = "N")]
    pub list_version: Option<u64>,
    /// Hours the list stays valid (default 168, a week); clients refuse it afterwards (freeze
    /// attack). Sign a new list before then; mirrors serving it hand it on to clients.
    #[arg(long, value_name = "H", value_parser = parse_hours)]
    pub valid_hours: Option<f64>,
}

/// Default validity of a mirror list: a week, like a manifest's.
pub const DEFAULT_LIST_VALID_HOURS: f64 = 168.0;

/// A number of hours from 0.001 (3.6 s, for tests) to 87600 (ten years).
fn parse_hours(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(hours) if (0.001..=87600.0).contains(&hours) => Ok(hours),
        _ => Err(format!(
            "{text:?} is not a number of hours from 0.001 to 87600"
        )),
    }
}

/// `pir release build`: packs the directory and prints what the release holds.
pub(super) fn build_release(args: &ReleaseBuildArgs) -> Result<()> {
    let key = SecretKey::load(&args.key)?;
    let options = release::BuildOptions {
        block_size: args.block_size,
        size_classes: args.size_classes,
        progress: !args.quiet,
        release_version: args.release_version,
        valid_seconds: args.valid_days.map(|days| (days * 86400.0) as u64),
        created_unix: args.created_unix,
        shards: args.shards.map(|shards| ShardOptions {
            shards,
            only: args.shard,
        }),
    };
    if args.shard.is_some() && (args.created_unix.is_none() || args.release_version.is_none()) {
        anyhow::bail!(
            "--shard K needs --release-version and --created-unix: every shard's process must \
             sign the same manifest"
        );
    }
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
    if let Some(shards) = args.shards {
        let written = match args.shard {
            Some(k) => format!("shard {k}'s part"),
            None => format!("{shards} shard parts"),
        };
        println!(
            "sharded: {written} and the shard map ({}) signed by the vendor key; serve with \
             `pir shard serve` and `pir front serve --map-key VENDOR.pub`",
            crate::release_shards::MAP_FILE
        );
    }
    Ok(())
}

/// `pir release show`: reads the manifest in `dir` (verified when `vendor_pub` is given) and
/// prints its summary.
pub(super) fn show_release(dir: &Path, vendor_pub: Option<&Path>) -> Result<()> {
    let path = dir.join(release::MANIFEST_FILE);
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let manifest = match vendor_pub {
        Some(pub_path) => Manifest::decode_verified(&bytes, &PublicKey::load(pub_path)?)?,
        None => Manifest::decode_unverified(&bytes)?,
    };
    let summary = release_summary(
        &Manifest::release_id(&bytes),
        &manifest,
        vendor_pub.is_some(),
        now_unix(),
    );
    print!("{summary}");
    Ok(())
}

/// The lines of `pir release show` for `manifest` (release id `id`), seen at `now`.
pub fn release_summary(id: &[u8; 32], manifest: &Manifest, verified: bool, now: u64) -> String {
    let mut text = format!("release id  {}\n", hex::encode(id));
    text += &format!(
        "signature   {}\n",
        if verified {
            "verified"
        } else {
            "not checked (pass --vendor-pub)"
        }
    );
    text += &format!(
        "blocks      {} x {} bytes\n",
        manifest.block_count, manifest.block_size
    );
    text += &format!("version     {}\n", manifest.release_version);
    text += &format!(
        "expires     {} ({})\n",
        manifest.expires_unix,
        describe_expiry(manifest.expires_unix, now)
    );
    text += &format!("files       {}\n", manifest.files.len());
    for file in &manifest.files {
        text += &format!(
            "  {:>12} bytes  {:>6} blocks  {}\n",
            file.size, file.block_count, file.name
        );
    }
    text
}

/// `pir mirror-list build`: signs the mirrors with the vendor key, checks the signature and
/// writes the list atomically.
pub(super) fn build_mirror_list(args: &MirrorListBuildArgs) -> Result<()> {
    let vendor = SecretKey::load(&args.vendor_key)?;
    let mut mirrors = args
        .mirrors
        .iter()
        .map(|arg| crate::mirrors::parse_mirror_arg(arg))
        .collect::<Result<Vec<_>, _>>()?;
    state_chunks_and_release(&mut mirrors, args, &vendor)?;
    let created_unix = now_unix();
    let hours = args.valid_hours.unwrap_or(DEFAULT_LIST_VALID_HOURS);
    let list = MirrorList {
        created_unix,
        list_version: args.list_version.unwrap_or(created_unix),
        expires_unix: created_unix + (hours * 3600.0) as u64,
        mirrors,
    };
    let bytes = list.encode_signed(&vendor);
    MirrorList::decode_verified(&bytes, &vendor.public())
        .context("the list we just signed does not verify")?;
    pir_fs::write_atomic_bytes(&args.out, &bytes)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "mirror list {}: {} mirrors, version {}, {}, signed by vendor key {}",
        args.out.display(),
        list.mirrors.len(),
        list.list_version,
        describe_expiry(list.expires_unix, created_unix),
        vendor.public().fingerprint()
    );
    Ok(())
}

/// Records `--mirror-chunks` and `--release` in the entries.
fn state_chunks_and_release(
    mirrors: &mut [crate::MirrorEntry],
    args: &MirrorListBuildArgs,
    vendor: &SecretKey,
) -> Result<()> {
    for arg in &args.mirror_chunks {
        let (url, chunks) = arg
            .rsplit_once('=')
            .with_context(|| format!("--mirror-chunks {arg:?} should be URL=LIST/C"))?;
        let url = url.strip_suffix('/').unwrap_or(url);
        let entry = mirrors
            .iter_mut()
            .find(|m| m.url == url)
            .with_context(|| format!("--mirror-chunks {url}: no --mirror with this URL"))?;
        entry.chunks = Some(crate::mirrors::parse_chunks(chunks)?);
    }
    if let Some(dir) = &args.release {
        let path = dir.join(release::MANIFEST_FILE);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let manifest = Manifest::decode_verified(&bytes, &vendor.public())
            .with_context(|| format!("the manifest in {}", dir.display()))?;
        let listed = crate::mirrors::ListedRelease {
            id: Manifest::release_id(&bytes),
            version: manifest.release_version,
        };
        for mirror in mirrors.iter_mut() {
            mirror.release = Some(listed);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FileEntry;

    #[test]
    fn the_summary_lists_every_file_and_says_whether_the_signature_was_checked() {
        let manifest = Manifest {
            block_size: 4096,
            block_count: 3,
            created_unix: 1_700_000_000,
            release_version: 42,
            expires_unix: 1_700_000_000 + 3 * 86400,
            files: vec![
                FileEntry {
                    name: "pool/a.deb".into(),
                    size: 5000,
                    first_block: 0,
                    block_count: 2,
                    sha256: [1; 32],
                },
                FileEntry {
                    name: "Release".into(),
                    size: 10,
                    first_block: 2,
                    block_count: 1,
                    sha256: [2; 32],
                },
            ],
            block_hashes: vec![[0; 32]; 3],
        };
        let text = release_summary(&[0xab; 32], &manifest, false, 1_700_000_000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("release id  {}", "ab".repeat(32)));
        assert_eq!(lines[1], "signature   not checked (pass --vendor-pub)");
        assert_eq!(lines[2], "blocks      3 x 4096 bytes");
        assert_eq!(lines[3], "version     42");
        assert_eq!(lines[4], "expires     1700259200 (valid for 3 days more)");
        assert_eq!(lines[5], "files       2");
        assert_eq!(lines[6], "          5000 bytes       2 blocks  pool/a.deb");
        assert_eq!(lines[7], "            10 bytes       1 blocks  Release");
        assert_eq!(lines.len(), 8);
        let verified = release_summary(&[0xab; 32], &manifest, true, 1_700_000_000);
        assert!(verified.contains("signature   verified\n"));
    }

    #[test]
    fn valid_days_are_bounded() {
        assert_eq!(parse_days("7"), Ok(7.0));
        assert_eq!(parse_days("0.0001"), Ok(0.0001));
        assert!(parse_days("0").is_err());
        assert!(parse_days("3651").is_err());
        assert!(parse_days("NaN").is_err());
        assert!(parse_days("a week").is_err());
        assert_eq!(parse_hours("168"), Ok(168.0));
        assert!(parse_hours("0").is_err());
        assert!(parse_hours("87601").is_err());
    }
}
