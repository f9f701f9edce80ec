//! The registry is complete: every scheme a server command accepts is registered with that
//! command, every PIR scheme the core knows is registered, and the README's privacy table is
//! the registry's.

use pir_core::{Database, DbShape, SchemeId};
use pir_service::checklist::{Checklist, Role};
use pir_service::registry::{self, ServerKind};
use pir_service::{Backend, Mirror};

/// Every scheme id the wire format knows.
fn every_id() -> Vec<SchemeId> {
    (0..=u8::MAX)
        .filter_map(|byte| SchemeId::from_byte(byte).ok())
        .collect()
}

#[test]
fn every_scheme_a_server_accepts_is_registered_with_that_server() {
    for kind in ServerKind::ALL {
        assert!(!kind.schemes().is_empty(), "{kind:?} serves nothing");
        for id in kind.schemes() {
            let entry = registry::lookup(*id).unwrap_or_else(|| {
                panic!(
                    "`{}` serves {}, which the registry lacks",
                    kind.command(),
                    id.name()
                )
            });
            assert!(
                entry.served_by.contains(&kind),
                "`{}` serves {}, but its registry entry does not say so",
                kind.command(),
                entry.name
            );
        }
    }
    for entry in registry::standard() {
        assert!(!entry.served_by.is_empty(), "{} has no server", entry.name);
        for kind in entry.served_by {
            assert!(
                kind.schemes().contains(&entry.id),
                "the registry says `{}` serves {}, but it refuses it",
                kind.command(),
                entry.name
            );
        }
    }
}

#[test]
fn every_pir_scheme_of_the_wire_format_is_registered_once() {
    let not_pir = [
        SchemeId::Control,
        SchemeId::OramStore,
        SchemeId::Experimental,
    ];
    for id in every_id() {
        let entries = registry::standard()
            .iter()
            .filter(|entry| entry.id == id)
            .count();
        let expected = usize::from(!not_pir.contains(&id));
        assert_eq!(
            entries,
            expected,
            "{} registered {entries} times",
            id.name()
        );
    }
    for entry in registry::standard() {
        assert!(!entry.name.is_empty() && !entry.purpose.is_empty());
        assert!(!entry.assumption.is_empty() && !entry.assumption.ends_with('.'));
    }
}

#[test]
fn backends_accept_exactly_the_schemes_they_list() {
    let shape = DbShape::new(16, 32).unwrap();
    let database = || Database::from_bytes(shape, &[7u8; 16 * 32]).unwrap();
    let mirror = Mirror::plain(database(), [1; 32], b"manifest".to_vec());
    let params = pir_xor::checklist::Params::new(16, 32).unwrap();
    let checklist = Checklist::new(params, database(), [2; 32], Role::Online, Vec::new()).unwrap();
    for id in every_id() {
        assert_eq!(
            mirror.accepts(id),
            Mirror::SCHEMES.contains(&id),
            "{}",
            id.name()
        );
        assert_eq!(
            checklist.accepts(id),
            Checklist::SCHEMES.contains(&id),
            "{}",
            id.name()
        );
        // A lattice backend serves the one scheme of its database, any of these.
        assert_eq!(
            pir_lattice::Scheme::from_id(id).is_ok(),
            pir_service::Lattice::SCHEMES.contains(&id),
            "{}",
            id.name()
        );
    }
}

#[test]
fn the_readme_privacy_table_is_the_registry() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let (begin, end) = ("<!-- schemes:begin -->\n", "<!-- schemes:end -->");
    let start = readme
        .find(begin)
        .expect("README has no <!-- schemes:begin --> line")
        + begin.len();
    let stop = readme[start..]
        .find(end)
        .expect("README has no <!-- schemes:end --> line")
        + start;
    assert!(
        readme[start..stop] == registry::markdown(),
        "the README's privacy table differs from the registry: replace the lines between the \
         schemes markers with the output of `pir schemes --markdown`"
    );
}

/// The cells of the row of `docs/security.md`'s table whose first cell is `set`.
fn security_row(doc: &str, set: &str) -> Vec<String> {
    let row = doc
        .lines()
        .find(|line| line.starts_with(&format!("| {set} |")))
        .unwrap_or_else(|| panic!("docs/security.md has no row for {set}"));
    row.trim_matches('|')
        .split('|')
        .map(|cell| cell.trim().trim_matches('*').to_string())
        .collect()
}

#[test]
fn registry_security_levels_are_the_estimates() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/security.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let text = registry::text();
    let mut lattice = 0;
    for entry in registry::standard() {
        let registry::Security::CoreSvp {
            classical,
            quantum,
            estimator,
            sets,
        } = entry.security
        else {
            assert_ne!(
                entry.family,
                registry::Family::SingleServer,
                "{} is a lattice scheme without a lattice estimate",
                entry.name
            );
            continue;
        };
        lattice += 1;
        assert!(!sets.is_empty(), "{} names no parameter set", entry.name);
        // The sets named are the ones the lattice crate says the scheme publishes.
        let scheme = pir_lattice::Scheme::from_id(entry.id).unwrap();
        let stated: Vec<&str> = pir_lattice::security::sets(scheme)
            .iter()
            .map(|set| set.name)
            .collect();
        assert_eq!(sets, stated.as_slice(), "{}", entry.name);
        // `pir schemes` shows every set with its own level.
        for set in pir_lattice::security::sets(scheme) {
            assert!(
                text.contains(&format!("{}: {} classical,", set.name, set.classical)),
                "{}: pir schemes does not show {}",
                entry.name,
                set.name
            );
        }
        // The scheme is as strong as its weakest set: columns "core-SVP bits C / Q" (12th)
        // and "estimator model" (13th).
        let mut weakest: Option<(u32, u32, u32)> = None;
        for set in sets {
            let cells = security_row(&doc, set);
            assert_eq!(cells.len(), 13, "{set}: {cells:?}");
            let (c, q) = cells[11].split_once(" / ").unwrap();
            let bits = (
                c.parse::<u32>().unwrap(),
                q.parse::<u32>().unwrap(),
                cells[12].parse::<u32>().unwrap(),
            );
            weakest = Some(match weakest {
                Some(w) if w.0 <= bits.0 => w,
                _ => bits,
            });
        }
        assert_eq!(
            weakest,
            Some((classical, quantum, estimator)),
            "{}: the registry's bits differ from docs/security.md",
            entry.name
        );
        assert!(
            entry
                .security
                .to_string()
                .contains(&format!("{classical} bits")),
            "{}",
            entry.name
        );
    }
    assert_eq!(
        lattice, 5,
        "SimplePIR, DoublePIR, YPIR, YPIR+SP and InsPIRe"
    );
}
