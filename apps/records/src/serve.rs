//! A database as `pir serve` serves it: opened, checked against the scheme, and its server
//! state taken from the offline work saved at an earlier start ([`crate::offline`]) or
//! computed (and saved for the next start).
//!
//! This crate writes nothing to the terminal: what happens is told to the caller's `note`
//! (one line each: "computing the hint ...", "saved the hint to ...") and the computation's
//! progress to its `progress` (done, total), which the server host logs and draws.

use std::path::Path;
use std::time::Instant;

use pir_lattice::Scheme;
use pir_service::Lattice;

use crate::format::{RecordDb, RecordsError};
use crate::{lookup, offline};

/// Opens the database at `db_path` for `scheme` and returns its server state: from the saved
/// offline work if it fits this very database, computed (and saved) otherwise. Runs on the
/// caller's thread pool (the hint computation uses every thread of it).
pub fn prepare(
    db_path: &Path,
    scheme: Scheme,
    note: &dyn Fn(&str),
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Lattice, RecordsError> {
    let db = RecordDb::open(db_path, true)?;
    let header = *db.header();
    let name = scheme.id().name();
    if let Err(why) = crate::scheme_fits(&header, scheme) {
        return Err(RecordsError::Input(format!(
            "{} cannot be served with {name}: {why}; serve it with `--scheme simplepir`",
            db_path.display()
        )));
    }
    // The offline work of an earlier start, if it is for this very database.
    let version = lookup::lattice_database(&header, &[], scheme).version;
    let mut saved = offline::load(db_path, scheme, &version).unwrap_or_else(|e| {
        note(&format!("{e}; computing the hint again"));
        None
    });
    let started = Instant::now();
    let (lattice, work, reused) = loop {
        let reused = saved.is_some();
        note(&if reused {
            let path = offline::path_for(db_path, scheme);
            format!("loading the saved {name} hint ({})", path.display())
        } else {
            format!(
                "computing the {name} hint of {} records of {} bytes",
                header.records, header.record_size
            )
        });
        let database = lookup::lattice_database(&header, db.payload(), scheme);
        match Lattice::with_saved(database, saved.take(), progress) {
            Ok((lattice, work)) => break (lattice, work, reused),
            Err(e) if reused => note(&format!(
                "the saved hint does not fit this database ({e}); computing it again"
            )),
            Err(e) => {
                return Err(RecordsError::Input(format!(
                    "serving {} with {name}: {e}",
                    db_path.display()
                )))
            }
        }
    };
    drop(db);
    let (seconds, download) = (started.elapsed().as_secs_f64(), lattice.download().len());
    note(&if scheme == Scheme::Ypir {
        format!(
            "offline work ready in {seconds:.2} s; no hint: a client downloads only the \
             {download}-byte header"
        )
    } else {
        format!(
            "hint ready in {seconds:.2} s: {download} bytes to download once per client and \
             database version"
        )
    });
    if !reused {
        note(&match offline::save(db_path, scheme, &version, &work) {
            Ok(path) => format!(
                "saved the hint to {} (the next start loads it)",
                path.display()
            ),
            Err(e) => format!("could not save the hint ({e}); the next start computes it again"),
        });
    }
    Ok(lattice)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    #[test]
    fn the_hint_is_computed_once_then_loaded_and_a_misfit_scheme_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let data: Vec<u8> = (0..64 * 16).map(|i| i as u8).collect();
        let (header, payload) = crate::build_records(&data, 16, &mut rand::rng()).unwrap();
        crate::format::write(&path, &header, &payload).unwrap();
        let notes = RefCell::new(Vec::new());
        let note = |line: &str| notes.borrow_mut().push(line.to_string());
        let mut steps = 0;
        let first = prepare(&path, Scheme::SimplePir, &note, &mut |_, _| steps += 1).unwrap();
        let said = notes.take();
        assert!(
            said[0].starts_with("computing the simplepir hint"),
            "{said:?}"
        );
        assert!(
            said.iter().any(|l| l.starts_with("saved the hint")),
            "{said:?}"
        );
        let again = prepare(&path, Scheme::SimplePir, &note, &mut |_, _| {}).unwrap();
        let said = notes.take();
        assert!(said[0].starts_with("loading the saved"), "{said:?}");
        assert!(!said.iter().any(|l| l.contains("computing")), "{said:?}");
        assert_eq!(first.download(), again.download(), "the same hint");
        assert!(steps > 0, "progress was reported");
        let wide = dir.path().join("wide.db");
        let (header, payload) = crate::build_records(&[1; 4 * 100], 100, &mut rand::rng()).unwrap();
        crate::format::write(&wide, &header, &payload).unwrap();
        let refused = prepare(&wide, Scheme::DoublePir, &note, &mut |_, _| {});
        assert!(refused.is_err_and(|e| e.to_string().contains("cannot be served with doublepir")));
        assert!(notes.take().is_empty(), "refused before any work");
    }
}
