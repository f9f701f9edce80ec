//! `pir db build`: a record or key-value database, checked against every scheme before it
//! is written.

use anyhow::{bail, Context, Result};

use super::{DbBuildArgs, LatticeSchemeArg};
use crate::{DbHeader, DbKind};

/// `pir db build`.
pub(super) fn build(args: &DbBuildArgs) -> Result<()> {
    if let Some(only) = args.shard {
        return build_one(args, usize::from(only));
    }
    let (header, payload) = read_input(args)?;
    // Every scheme's limits are checked now, not first when `pir serve` starts.
    let served = served_by(&header, args.scheme)?;
    if let Some(shards) = args.shards {
        let scheme = shard_scheme(args.scheme)?;
        let key = args.key.as_deref();
        let input = (&header, payload.as_slice());
        return super::shard::build(&args.out, input, scheme, shards.into(), key);
    }
    crate::format::write(&args.out, &header, &payload)?;
    match header.kind {
        DbKind::Records => println!(
            "database {}: {} records of {} bytes ({} bytes)",
            args.out.display(),
            header.records,
            header.record_size,
            header.payload_bytes()
        ),
        DbKind::KeyValue => println!(
            "database {}: {} keys in {} cuckoo slots of {} bytes (values up to {} bytes; {} bytes)",
            args.out.display(),
            header.entries,
            header.records,
            header.record_size,
            header.record_size - crate::cuckoo::SLOT_OVERHEAD,
            header.payload_bytes()
        ),
    }
    println!("{served}");
    Ok(())
}

/// The lattice scheme of a sharded build's `--scheme` (default SimplePIR).
pub(super) fn shard_scheme(scheme: Option<LatticeSchemeArg>) -> Result<pir_lattice::Scheme> {
    Ok(match scheme {
        None | Some(LatticeSchemeArg::Simplepir) => pir_lattice::Scheme::SimplePir,
        Some(LatticeSchemeArg::Doublepir) => pir_lattice::Scheme::DoublePir,
        Some(LatticeSchemeArg::Ypir) => pir_lattice::Scheme::Ypir,
        Some(_) => bail!(
            "sharded databases are served with SimplePIR, DoublePIR or YPIR so far \
             (InsPIRe's packing step at the front end is not built yet)"
        ),
    })
}

/// `--matrix-seeds HEX`: the seeds of `A` and `A2`, 16 bytes each.
pub(super) fn matrix_seeds(hex_digits: &str) -> Result<[[u8; 16]; 2]> {
    let bytes = hex::decode(hex_digits.trim())
        .ok()
        .filter(|bytes| bytes.len() == 32)
        .context("--matrix-seeds takes 64 hex digits (32 bytes: the seeds of A and A2)")?;
    let mut seeds = [[0u8; 16]; 2];
    seeds[0].copy_from_slice(&bytes[..16]);
    seeds[1].copy_from_slice(&bytes[16..]);
    Ok(seeds)
}

/// The note printed when the last record is shorter than the others.
pub(super) fn note_padding(header: &DbHeader) {
    if header.last_len < header.record_size {
        println!(
            "note: the last record (number {}) has {} bytes; it is zero-padded to {}",
            header.records - 1,
            header.last_len,
            header.record_size
        );
    }
}

/// `pir db build --shards S --shard K`: shard K's part and the map, from one pass over the
/// records file (`crate::shards_build`); refuses what other processes could not repeat.
fn build_one(args: &DbBuildArgs, only: usize) -> Result<()> {
    let Some(shards) = args.shards.map(usize::from) else {
        bail!("--shard K needs --shards S (the shard count, the same in every process)");
    };
    if args.kv.is_some() {
        bail!(
            "--shard cannot build one part of a key-value database: cuckoo hashing places \
             every key, so each part depends on all of them; build all parts at once with \
             --shards {shards} (without --shard)"
        );
    }
    if only >= shards {
        bail!(
            "--shard {only}: there is no such shard of {shards} (they are numbered 0 to {})",
            shards - 1
        );
    }
    let missing = [
        (args.key.is_none(), "--key MAP.key"),
        (args.matrix_seeds.is_none(), "--matrix-seeds HEX"),
    ];
    if let Some((_, flag)) = missing.iter().find(|(absent, _)| *absent) {
        bail!(
            "--shard builds one part of a database that other processes build too: give \
             {flag} (the same in every process)"
        );
    }
    let (Some(path), Some(size)) = (&args.records, args.record_size) else {
        bail!("--shard needs --records FILE --record-size BYTES");
    };
    let scheme = shard_scheme(args.scheme)?;
    let seeds = matrix_seeds(args.matrix_seeds.as_deref().unwrap_or_default())?;
    let key_path = args.key.as_deref().unwrap_or(std::path::Path::new(""));
    let key = pir_keys::SecretKey::load(key_path)
        .with_context(|| format!("reading {}", key_path.display()))?;
    let mut records = crate::shards_build::RecordsFile::open(path)?;
    // Every scheme's limits are checked before the file is read, as for a whole build.
    let shape = records.header(size, seeds)?;
    served_by(&shape, args.scheme)?;
    let map = crate::shards_build::write_one(
        &args.out,
        &mut records,
        size,
        seeds,
        (scheme, shards, only),
        &key,
    )?;
    note_padding(&shape);
    super::shard::print_built(&args.out, &shape, &map, Some(only), &key);
    Ok(())
}

/// The database's header and payload from `--records` or `--kv`.
fn read_input(args: &DbBuildArgs) -> Result<(DbHeader, Vec<u8>)> {
    let mut rng = rand::rng();
    match (&args.records, &args.kv) {
        (Some(path), None) => {
            let size = args
                .record_size
                .context("--records needs --record-size BYTES")?;
            let data =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let (mut header, payload) = crate::build_records(&data, size, &mut rng)?;
            if let Some(seeds) = &args.matrix_seeds {
                header.matrix_seeds = matrix_seeds(seeds)?;
            }
            note_padding(&header);
            Ok((header, payload))
        }
        (None, Some(path)) => {
            let text =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let pairs = crate::parse_key_values(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            Ok(crate::build_key_values(&pairs, &mut rng)?)
        }
        _ => bail!("give either --records FILE --record-size BYTES or --kv FILE"),
    }
}

/// The `served by: ...` line of the database `header` describes: the schemes that can serve
/// it, and why the others cannot. An error if `wanted` cannot serve it (naming one that can),
/// or if none can.
pub fn served_by(header: &DbHeader, wanted: Option<LatticeSchemeArg>) -> Result<String> {
    let fits: Vec<(LatticeSchemeArg, Result<(), String>)> = LatticeSchemeArg::ALL
        .into_iter()
        .map(|arg| (arg, crate::scheme_fits(header, arg.scheme())))
        .collect();
    let serving: Vec<&str> = fits
        .iter()
        .filter(|(_, fit)| fit.is_ok())
        .map(|(arg, _)| arg.name())
        .collect();
    let (records, size) = (header.records, header.record_size);
    if let Some((arg, Err(why))) = fits.iter().find(|(arg, _)| Some(*arg) == wanted) {
        let name = arg.name();
        match serving.first() {
            Some(other) => bail!(
                "{name} cannot serve {records} records of {size} bytes ({why}); build it with \
                 --scheme {other} and serve it with `pir serve --scheme {other}`"
            ),
            None => bail!("no scheme can serve {records} records of {size} bytes: {why}"),
        }
    }
    let unfit: Vec<String> = fits
        .iter()
        .filter_map(|(arg, fit)| {
            fit.as_ref()
                .err()
                .map(|why| format!("{}: {why}", arg.name()))
        })
        .collect();
    if serving.is_empty() {
        let why = fits.iter().find_map(|(_, fit)| fit.as_ref().err());
        bail!(
            "no scheme can serve {records} records of {size} bytes: {}",
            why.cloned().unwrap_or_default()
        );
    }
    let ypir_sp = ypir_sp(header);
    let listed: Vec<String> = serving
        .iter()
        .map(|name| match (*name, ypir_sp) {
            ("ypir", true) => "ypir (as YPIR+SP: records over 8 bytes)".to_string(),
            _ => name.to_string(),
        })
        .collect();
    Ok(if unfit.is_empty() {
        format!("served by: {}", listed.join(", "))
    } else {
        format!(
            "served by: {} (not {})",
            listed.join(", "),
            unfit.join("; ")
        )
    })
}

/// Whether `ypir` serves this database as YPIR+SP (records over 8 bytes).
fn ypir_sp(header: &DbHeader) -> bool {
    pir_lattice::params::Params::new(
        pir_lattice::Scheme::Ypir,
        header.records,
        u32::try_from(header.record_size.saturating_mul(8)).unwrap_or(u32::MAX),
    )
    .is_ok_and(|p| p.scheme == pir_lattice::Scheme::YpirSp)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn header(records: usize, size: usize) -> DbHeader {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        crate::build_records(&vec![7; records * size], size, &mut rng)
            .unwrap()
            .0
    }

    /// `pir db build` with these flags after `pir`.
    fn parse(flags: &str) -> Result<DbBuildArgs, clap::Error> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(subcommand)]
            command: super::super::RecordsCommand,
        }
        let words = ["pir", "db", "build"].into_iter().chain(flags.split(' '));
        match <Cli as clap::Parser>::try_parse_from(words)?.command {
            super::super::RecordsCommand::Db(super::super::DbCommand::Build(args)) => Ok(args),
            _ => unreachable!("`pir db build` parses as a build"),
        }
    }

    const SEEDS: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    /// `--shard K` processes write the part and map that `--shards S` alone writes with the
    /// same seeds and key (DoublePIR, a file that is not a whole number of records).
    #[test]
    fn shard_builds_from_the_command_match_the_whole_build() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name).display().to_string();
        let data: Vec<u8> = (0..3001u32).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(at("records.bin"), &data).unwrap();
        pir_keys::SecretKey::generate()
            .unwrap()
            .save(&dir.path().join("map.key"))
            .unwrap();
        let common = format!(
            "--records {} --record-size 5 --shards 3 --scheme doublepir --key {} \
             --matrix-seeds {SEEDS}",
            at("records.bin"),
            at("map.key")
        );
        let common = common.split_whitespace().collect::<Vec<_>>().join(" ");
        build(&parse(&format!("{common} --out {}", at("whole"))).unwrap()).unwrap();
        for k in 0..3 {
            let out = at(&format!("one{k}"));
            build(&parse(&format!("{common} --shard {k} --out {out}")).unwrap()).unwrap();
            for file in [format!("shard-{k}.part"), "shard-map.bin".to_string()] {
                let whole = std::fs::read(dir.path().join("whole").join(&file)).unwrap();
                let one = std::fs::read(std::path::Path::new(&out).join(&file)).unwrap();
                assert!(whole == one, "shard {k}: {file} differs");
            }
        }
        let map = crate::shards::read_map(&dir.path().join("one1"), None).unwrap();
        let header = DbHeader::decode(&map.about).unwrap();
        assert_eq!(header.matrix_seeds, matrix_seeds(SEEDS).unwrap());
        assert_eq!((header.records, header.last_len), (601, 1));
    }

    /// What a `--shard` build cannot do is refused, saying why and what to give instead.
    #[test]
    fn shard_builds_refuse_what_other_processes_cannot_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let records = dir.path().join("records.bin");
        std::fs::write(&records, vec![1u8; 5000]).unwrap();
        std::fs::write(dir.path().join("pairs.txt"), "a,1\nb,2\n").unwrap();
        let key = dir.path().join("map.key");
        pir_keys::SecretKey::generate().unwrap().save(&key).unwrap();
        let (records, key) = (records.display(), key.display());
        let out = dir.path().join("out");
        let out = out.display();
        let error = |flags: String| {
            let args = parse(&flags).unwrap();
            build(&args).unwrap_err().to_string()
        };
        let base = format!("--records {records} --record-size 10 --out {out}");
        let full = format!("{base} --key {key} --matrix-seeds {SEEDS} --shards 2");
        assert_eq!(
            error(format!("{full} --shard 2")),
            "--shard 2: there is no such shard of 2 (they are numbered 0 to 1)"
        );
        assert!(error(format!(
            "{base} --matrix-seeds {SEEDS} --shards 2 --shard 0"
        ))
        .ends_with("give --key MAP.key (the same in every process)"));
        assert!(error(format!("{base} --key {key} --shards 2 --shard 0"))
            .ends_with("give --matrix-seeds HEX (the same in every process)"));
        assert!(error(format!(
            "{base} --key {key} --matrix-seeds 00ff --shards 2 --shard 0"
        ))
        .starts_with("--matrix-seeds takes 64 hex digits"));
        assert!(error(format!("{full} --shard 0 --scheme inspire"))
            .starts_with("sharded databases are served with SimplePIR, DoublePIR or YPIR"));
        // Limits are checked before anything is read or written: DoublePIR records are at
        // most 72 bytes.
        let large = format!("--records {records} --record-size 100 --out {out}");
        let large = format!("{large} --key {key} --matrix-seeds {SEEDS} --shards 2");
        assert!(error(format!("{large} --shard 0 --scheme doublepir"))
            .starts_with("doublepir cannot serve 50 records of 100 bytes"));
        assert!(!dir.path().join("out").exists());
        // A key-value database needs every key in the process that places them.
        let kv = dir.path().join("pairs.txt");
        let kv = format!("--kv {} --out {out} --key {key} --shards 2", kv.display());
        assert!(error(format!("{kv} --shard 0"))
            .starts_with("--shard cannot build one part of a key-value database"));
        // Without --shards, --shard does not parse; nor do seeds with --kv.
        assert!(parse(&format!("{base} --shard 0")).is_err());
        assert!(parse(&format!("{kv} --matrix-seeds {SEEDS}")).is_err());
    }

    #[test]
    fn small_records_are_served_by_every_scheme() {
        let line = served_by(&header(1000, 1), None).unwrap();
        assert_eq!(line, "served by: simplepir, doublepir, ypir, inspire");
    }

    #[test]
    fn large_records_name_the_schemes_that_cannot_serve_them() {
        let line = served_by(&header(100, 100), None).unwrap();
        assert!(
            line.starts_with(
                "served by: simplepir, ypir (as YPIR+SP: records over 8 bytes), inspire (not \
                 doublepir: "
            ),
            "{line}"
        );
        assert!(served_by(&header(100, 100), Some(LatticeSchemeArg::Simplepir)).is_ok());
    }

    #[test]
    fn a_scheme_that_cannot_serve_is_refused_naming_one_that_can() {
        let error = served_by(&header(100, 100), Some(LatticeSchemeArg::Doublepir))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("doublepir cannot serve 100 records of 100 bytes ("),
            "{error}"
        );
        assert!(
            error.ends_with(
                "build it with --scheme simplepir and serve it with `pir serve --scheme simplepir`"
            ),
            "{error}"
        );
    }
}
