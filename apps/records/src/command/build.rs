//! `pir db build`: a record or key-value database, checked against every scheme before it
//! is written.

use anyhow::{bail, Context, Result};

use super::{DbBuildArgs, LatticeSchemeArg};
use crate::{DbHeader, DbKind};

/// `pir db build`.
pub(super) fn build(args: &DbBuildArgs) -> Result<()> {
    let (header, payload) = read_input(args)?;
    // Every scheme's limits are checked now, not first when `pir serve` starts.
    let served = served_by(&header, args.scheme)?;
    if let Some(shards) = args.shards {
        let scheme = match args.scheme {
            None | Some(LatticeSchemeArg::Simplepir) => pir_lattice::Scheme::SimplePir,
            Some(LatticeSchemeArg::Doublepir) => pir_lattice::Scheme::DoublePir,
            Some(LatticeSchemeArg::Ypir) => pir_lattice::Scheme::Ypir,
            Some(_) => bail!(
                "sharded databases are served with SimplePIR, DoublePIR or YPIR so far \
                 (InsPIRe's packing step at the front end is not built yet)"
            ),
        };
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
            let (header, payload) = crate::build_records(&data, size, &mut rng)?;
            if header.last_len < size {
                println!(
                    "note: the last record (number {}) has {} bytes; it is zero-padded to {size}",
                    header.records - 1,
                    header.last_len
                );
            }
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
