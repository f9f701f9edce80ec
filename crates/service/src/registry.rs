//! The one place a scheme is known: every scheme the `pir` binary serves, with its name, what it
//! is for, how many servers it needs, what a user must trust for privacy, and which server
//! commands may serve it.
//!
//! Everything a user reads about privacy comes from here: the privacy section of `pir --help`
//! ([`help`]), `pir schemes` ([`text`]), the README's privacy table ([`markdown`], compared
//! with the README by a test) and the `privacy:` line that `pir fetch`, `pir get`,
//! `pir breach check` and the Safe Browsing proxy print ([`Privacy`]).
//!
//! Adding a scheme: give it a [`SchemeId`], implement its sans-I/O scheme (a `pir-xor` or
//! `pir-lattice` trait) and a [`crate::Backend`] that lists it in its `SCHEMES`, and add one
//! [`SchemeEntry`] to [`STANDARD`]. The conformance harness ([`crate::conformance::check`]) runs
//! every entry of [`STANDARD`] through the same correctness, malformed-input and privacy-shape
//! checks over the signed-batch service, so a new entry is tested the moment it is registered;
//! a test fails while a server kind ([`ServerKind::schemes`]) accepts a scheme that has no
//! entry naming that kind.

use std::fmt;

use pir_core::SchemeId;
use pir_lattice::security;
use pir_lattice::Scheme as LatticeScheme;

use crate::conformance::{self, Deploy};

/// How a scheme's answers from shards holding disjoint rows combine into the whole answer
/// (the shard module's documentation gives the algebra; it implements the combining).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// XOR of the parts, byte by byte (parts of equal length).
    Xor,
    /// The sum mod `q = 2^32` of the parts' words (lattice answer messages, and hints):
    /// SimplePIR's shards split the matrix's columns, DoublePIR's its rows.
    AddModQ,
    /// YPIR: the sum mod `q2` of the parts' leaf bodies and masks (shards split the matrix's
    /// rows), then packed with the client's keys at the front end (`shard::YpirFront`).
    AddThenPack,
    /// Not combinable yet, and why.
    NotYet(&'static str),
}

/// Why YPIR+SP parts cannot be combined yet.
const YPIR_SP_SHARDS: &str =
    "YPIR+SP combines before its packing step, at the front end: not done yet";
/// Why InsPIRe parts cannot be combined yet.
const INSPIRE_SHARDS: &str =
    "InsPIRe combines before its packing step, at the front end: not done yet";

/// Families of schemes, by what privacy rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Family {
    /// Several servers; privacy while they do not collude.
    MultiServer,
    /// One server; privacy from a lattice assumption (LWE or ring-LWE), none about servers.
    SingleServer,
}

impl Family {
    /// The family in a user's words.
    pub fn name(self) -> &'static str {
        match self {
            Family::MultiServer => "multi-server",
            Family::SingleServer => "single-server",
        }
    }
}

/// How many servers one query goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Servers {
    /// Exactly this many.
    Exactly(u8),
    /// This many or more.
    AtLeast(u8),
}

impl fmt::Display for Servers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Servers::Exactly(n) => write!(f, "{n}"),
            Servers::AtLeast(n) => write!(f, "{n} or more"),
        }
    }
}

/// How strong a scheme's privacy is against servers within its assumption, as `pir schemes`
/// states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Security {
    /// No computational assumption: privacy holds against servers of unbounded power.
    InformationTheoretic,
    /// AES-128 used as a pseudorandom generator: 128 bits.
    Aes128,
    /// A lattice assumption: the core-SVP cost, in bits, of the cheaper of the primal and dual
    /// attacks on the weakest parameter set the scheme publishes. `sets` name the rows of
    /// `docs/security.md` (computed by `benches/security_estimate.py`); a test checks these
    /// numbers against that table.
    CoreSvp {
        /// Classical core-SVP bits (`0.292 β`).
        classical: u32,
        /// Quantum core-SVP bits (`0.265 β`).
        quantum: u32,
        /// The same primal attack in the lattice estimator's cost model
        /// (`0.292 β + 16.4 + log2 8D`), the one behind the papers' "128-bit" claims.
        estimator: u32,
        /// The parameter sets (rows of `docs/security.md`) the scheme publishes.
        sets: &'static [&'static str],
    },
}

impl fmt::Display for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Security::InformationTheoretic => {
                f.write_str("information-theoretic (no computational assumption)")
            }
            Security::Aes128 => f.write_str("128 bits (AES-128 as a pseudorandom generator)"),
            Security::CoreSvp {
                classical,
                quantum,
                estimator,
                ..
            } => {
                if *classical < 128 {
                    f.write_str("below 128 bits: ")?;
                }
                write!(
                    f,
                    "{classical} bits classical, {quantum} quantum (core-SVP, the cheaper of \
                     the primal and dual attacks; {estimator} in the lattice estimator's cost \
                     model, the one behind the papers' 128 bits; docs/security.md)"
                )
            }
        }
    }
}

/// The server commands of the `pir` binary that answer PIR queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `pir mirror serve`: releases, over [`crate::Mirror`].
    Mirror,
    /// `pir serve`: record and key-value databases, over [`crate::Lattice`].
    SingleServer,
    /// `pir breach serve`: breach corpora, over [`crate::qdp::Qdp`] (wrapped by `pir-breach`,
    /// whose `BreachBackend::SCHEMES` its registry test checks against [`Self::schemes`]).
    Breach,
    /// `pir safebrowsing serve`: blocklists, over [`crate::checklist::Checklist`] (which
    /// also answers SinglePass and DPF).
    SafeBrowsing,
}

impl ServerKind {
    /// Every server kind.
    pub const ALL: [ServerKind; 4] = [
        ServerKind::Mirror,
        ServerKind::SingleServer,
        ServerKind::Breach,
        ServerKind::SafeBrowsing,
    ];

    /// The command that runs it.
    pub fn command(self) -> &'static str {
        match self {
            ServerKind::Mirror => "pir mirror serve",
            ServerKind::SingleServer => "pir serve",
            ServerKind::Breach => "pir breach serve",
            ServerKind::SafeBrowsing => "pir safebrowsing serve",
        }
    }

    /// Every scheme its backend accepts (the backend's own list, which its `accepts` reads).
    pub fn schemes(self) -> &'static [SchemeId] {
        match self {
            ServerKind::Mirror => crate::Mirror::SCHEMES,
            ServerKind::SingleServer => crate::Lattice::SCHEMES,
            ServerKind::Breach => crate::qdp::Qdp::SCHEMES,
            ServerKind::SafeBrowsing => crate::checklist::Checklist::SCHEMES,
        }
    }
}

/// One registered scheme.
#[derive(Debug, Clone, Copy)]
pub struct SchemeEntry {
    /// Its wire id; `id.name()` is the name on the command line.
    pub id: SchemeId,
    /// Its name for people.
    pub name: &'static str,
    /// Its family.
    pub family: Family,
    /// Servers one query goes to.
    pub servers: Servers,
    /// What it is for, and which command uses it.
    pub purpose: &'static str,
    /// What must hold for the servers to learn nothing, in words a user understands (a
    /// lower-case clause with no final full stop, so that it reads after "privacy: NAME: ").
    pub assumption: &'static str,
    /// How strong that assumption is (`docs/security.md` for the lattice schemes).
    pub security: Security,
    /// The server commands that may serve it.
    pub served_by: &'static [ServerKind],
    /// A small deployment of it for the conformance harness.
    pub deploy: Deploy,
    /// How the answers of shards holding disjoint rows combine (the shard module says why).
    pub combine: Combine,
}

/// The LWE parameters of SimplePIR and DoublePIR.
const LWE: &str = "learning with errors (LWE) is hard at n = 1280, q = 2^32, σ = 6.4; then the server learns nothing about which record or key you \
                   asked for, and nothing is assumed about it or any other server";

/// A lattice scheme's level: the weakest of its parameter sets as `pir_lattice::security`
/// states them (the estimates of `benches/security_estimate.py`); `sets` are those sets' names
/// (rows of `docs/security.md`), which the registry test checks against
/// `pir_lattice::security::sets`.
const fn lattice_security(scheme: LatticeScheme, sets: &'static [&'static str]) -> Security {
    let weakest = security::level(scheme);
    Security::CoreSvp {
        classical: weakest.classical,
        quantum: weakest.quantum,
        estimator: weakest.estimator,
        sets,
    }
}

/// The security of SimplePIR and DoublePIR, which share the one LWE set.
const LWE_SECURITY: Security = lattice_security(LatticeScheme::SimplePir, &[security::LWE.name]);

/// The schemes this build serves, in the order users read them.
pub const STANDARD: &[SchemeEntry] = &[
    SchemeEntry {
        id: SchemeId::Chor,
        name: "Chor",
        family: Family::MultiServer,
        servers: Servers::AtLeast(2),
        purpose: "private file downloads from mirrors (`pir fetch --scheme chor`): the \
                  simplest scheme, one bit per block of the release to each mirror",
        assumption: "as long as at least one of the mirrors asked does not collude with the \
                     others, none of them learns which file you fetched",
        security: Security::InformationTheoretic,
        served_by: &[ServerKind::Mirror],
        deploy: conformance::deploy_chor,
        combine: Combine::Xor,
    },
    SchemeEntry {
        id: SchemeId::RaidPir,
        name: "RAID-PIR",
        family: Family::MultiServer,
        servers: Servers::AtLeast(2),
        purpose: "private file downloads from mirrors, the default of `pir fetch` and of the \
                  apt method: a short query per mirror, each scanning about r/n of the data",
        assumption: "as long as no r of the mirrors asked collude, none of them learns which \
                     file you fetched (r is the redundancy; by default 3 mirrors and r = 2: no \
                     two of them collude)",
        security: Security::Aes128,
        served_by: &[ServerKind::Mirror],
        deploy: conformance::deploy_raid_pir,
        combine: Combine::Xor,
    },
    SchemeEntry {
        id: SchemeId::Dpf,
        name: "DPF",
        family: Family::MultiServer,
        servers: Servers::Exactly(2),
        purpose: "private file downloads from two mirrors (`pir fetch --scheme dpf`) and Safe \
                  Browsing buckets too small for Checklist: a key of a few hundred bytes per \
                  server instead of one bit per block",
        assumption: "as long as the two servers asked do not collude, neither learns which \
                     record you asked for (each receives one DPF key, pseudorandom under AES: \
                     128-bit security)",
        security: Security::Aes128,
        served_by: &[ServerKind::Mirror, ServerKind::SafeBrowsing],
        deploy: conformance::deploy_dpf,
        combine: Combine::Xor,
    },
    SchemeEntry {
        id: SchemeId::Qdp,
        name: "QDP",
        family: Family::MultiServer,
        servers: Servers::Exactly(2),
        purpose: "private credential checks (`pir breach check`, the HIBP range proxy): \
                  RAID-PIR with query-dependent preprocessing, most of each answer computed \
                  before the query arrives",
        assumption: "as long as the two servers do not collude, neither learns which record \
                     you asked for: for `pir breach check`, nothing about the credential or \
                     the bucket it falls in (the server holding the blinding key sees only a \
                     uniformly random point)",
        security: Security::Aes128,
        served_by: &[ServerKind::Breach],
        deploy: conformance::deploy_qdp,
        combine: Combine::Xor,
    },
    SchemeEntry {
        id: SchemeId::Checklist,
        name: "Checklist",
        family: Family::MultiServer,
        servers: Servers::Exactly(2),
        purpose: "private Safe Browsing lookups for Firefox (`pir safebrowsing proxy`): hints \
                  downloaded once from an offline server, each lookup answered by an online \
                  server in O(sqrt n)",
        assumption: "as long as the offline server and the online server do not collude, \
                     neither learns which record (which full hash) you looked up: each sees, \
                     per lookup, one set of about sqrt(n) records with one position removed at \
                     random (pseudorandom under AES); they do learn that a lookup happened, \
                     and the proxy on your machine sees your prefixes in the clear, so it \
                     listens on loopback only",
        security: Security::Aes128,
        served_by: &[ServerKind::SafeBrowsing],
        deploy: conformance::deploy_checklist,
        combine: Combine::Xor,
    },
    SchemeEntry {
        id: SchemeId::SinglePass,
        name: "SinglePass",
        family: Family::MultiServer,
        servers: Servers::Exactly(2),
        purpose: "private Safe Browsing lookups (`pir safebrowsing proxy --scheme \
                  singlepass`): hints made by the offline server in one pass over the list, \
                  each lookup one record read per row on each server, and an update of the \
                  hints one XOR per changed record",
        assumption: "as long as the offline server and the online server do not collude, \
                     neither learns which record (which full hash) you looked up: the offline \
                     server sees your hint seed once and then, per lookup, one uniformly random \
                     column per row; the online server sees, per lookup, one column per row \
                     that is uniformly random and independent of the record and of your \
                     earlier lookups (no computational assumption beyond the seed's AES \
                     expansion); both learn that a lookup happened, and the proxy on your \
                     machine sees your prefixes in the clear, so it listens on loopback only",
        security: Security::Aes128,
        served_by: &[ServerKind::SafeBrowsing],
        deploy: conformance::deploy_singlepass,
        // An answer is one record per grid row, so shards split by rows would concatenate
        // their parts (an XOR of zero-filled parts); no shard server builds that yet.
        combine: Combine::NotYet("SinglePass shards (split by grid rows) are not built yet"),
    },
    SchemeEntry {
        id: SchemeId::SimplePir,
        name: "SimplePIR",
        family: Family::SingleServer,
        servers: Servers::Exactly(1),
        purpose: "records and key-value lookups from one server (`pir serve`, `pir get`): the \
                  fastest answers; a hint to download once per database version that grows \
                  with the square root of the database",
        assumption: LWE,
        security: LWE_SECURITY,
        served_by: &[ServerKind::SingleServer],
        deploy: conformance::deploy_simple_pir,
        combine: Combine::AddModQ,
    },
    SchemeEntry {
        id: SchemeId::DoublePir,
        name: "DoublePIR",
        family: Family::SingleServer,
        servers: Servers::Exactly(1),
        purpose: "records and key-value lookups from one server (`pir serve --scheme \
                  doublepir`): a 25 MiB hint whatever the database size, records of at most \
                  64 to 72 bytes, slower answers",
        assumption: LWE,
        security: LWE_SECURITY,
        served_by: &[ServerKind::SingleServer],
        deploy: conformance::deploy_double_pir,
        combine: Combine::AddModQ,
    },
    SchemeEntry {
        id: SchemeId::Ypir,
        name: "YPIR",
        family: Family::SingleServer,
        servers: Servers::Exactly(1),
        purpose: "records of up to 8 bytes from one server with no hint download (`pir serve \
                  --scheme ypir`): one-time keys of 1.1 MB uploaded once per server, then \
                  queries of 352 KB at 1 GiB, answers of 22.5 KB per packed ciphertext",
        assumption: "ring-LWE is hard at d = 2048, q = 2^32, σ = 6.4, ternary secret (first \
                     layer) and at d = 4096, q = 268369921 × 249561089 (log2 q = 55.9), σ = \
                     6.4, ternary secret (second layer and packing keys); then the server \
                     learns nothing about which record or key you asked for. Your client's \
                     one-time keys (uploaded with its first query, named by a key id after \
                     that) link your queries to that server to each other for up to an hour, \
                     as a session would, and reveal nothing about which records you asked for. \
                     The paper's d = 1024 and d = 2048 (94 and 96 bits core-SVP) were doubled \
                     to reach 128",
        security: lattice_security(
            LatticeScheme::Ypir,
            &[security::YPIR_FIRST.name, security::RING.name],
        ),
        served_by: &[ServerKind::SingleServer],
        deploy: conformance::deploy_ypir,
        combine: Combine::AddThenPack,
    },
    SchemeEntry {
        id: SchemeId::YpirSp,
        name: "YPIR+SP",
        family: Family::SingleServer,
        servers: Servers::Exactly(1),
        purpose: "records over 8 bytes and key-value databases from one server with no hint \
                  download (chosen by `pir serve --scheme ypir` from the record size): \
                  answers of about 22.5 KB per 8 KiB of record",
        assumption: "ring-LWE is hard at YPIR's second-layer parameters (d = 4096, q = \
                     268369921 × 249561089, log2 q = 55.9, σ = 6.4, ternary secret); then the \
                     server learns nothing about which record or key you asked for. The key \
                     id of your one-time keys links your queries to that server to each other \
                     for up to an hour, as a session would, and reveals nothing about the \
                     records",
        security: lattice_security(LatticeScheme::YpirSp, &[security::RING.name]),
        served_by: &[ServerKind::SingleServer],
        deploy: conformance::deploy_ypir_sp,
        combine: Combine::NotYet(YPIR_SP_SHARDS),
    },
    SchemeEntry {
        id: SchemeId::Inspire,
        name: "InsPIRe",
        family: Family::SingleServer,
        servers: Servers::Exactly(1),
        purpose: "records of any size up to 64 KiB and key-value lookups from one server with \
                  no hint download and small queries (`pir serve --scheme inspire`): about \
                  248 KB up and down per query at 1 GiB of 1-bit records once the one-time \
                  keys (172 KB) are uploaded",
        assumption: "ring-LWE is hard at d = 4096, q = 268369921 × 249561089 (log2 q = 55.9), \
                     σ = 6.4, ternary secret (query and packing keys); then the server learns \
                     nothing about which record or key you asked for. Your client's one-time \
                     keys (uploaded with its first query, named by a key id after that) link \
                     your queries to that server to each other for up to an hour, as a \
                     session would, and reveal nothing about which records you asked for",
        security: lattice_security(LatticeScheme::Inspire, &[security::RING.name]),
        served_by: &[ServerKind::SingleServer],
        deploy: conformance::deploy_inspire,
        combine: Combine::NotYet(INSPIRE_SHARDS),
    },
];

/// Oblivious storage is not PIR and has no registry entry, but users read its assumption
/// beside the schemes'.
pub const OBLIVIOUS_STORAGE: &str = "the client (your machine, its STATE and STATE.key) is \
     trusted; the stores are not. Each store sees sealed slots, which slot numbers are read and \
     written, and when: that pattern has the same distribution whatever you read or write. A \
     store that changes, swaps or rolls back data is detected";

/// How strong oblivious storage's sealing is.
const OBLIVIOUS_STORAGE_SECURITY: &str = "at least 128 bits (AES-256-GCM sealing); the access \
     pattern hides what you do by randomness alone, with no computational assumption";

/// What oblivious storage is for.
const OBLIVIOUS_STORAGE_PURPOSE: &str = "a disk on stores you do not trust (`pir oram`), hiding \
     which blocks you read or write";

/// What every mirror learns whatever the scheme.
pub const MIRRORS_LEARN: &str = "Mirrors do learn that you fetched some file and how many \
     blocks it has; build releases with --size-classes so that this count reveals only a size \
     class.";

/// The schemes this build serves.
pub fn standard() -> &'static [SchemeEntry] {
    STANDARD
}

/// The entry of `id`, if this build serves it.
pub fn lookup(id: SchemeId) -> Option<&'static SchemeEntry> {
    STANDARD.iter().find(|entry| entry.id == id)
}

/// How shard parts of `id` are combined by a front end (`NotYet` for an unregistered id).
pub fn combine_of(id: SchemeId) -> Combine {
    lookup(id).map_or(Combine::NotYet("not a registered scheme"), |e| e.combine)
}

/// The privacy assumptions of the schemes a command uses, as it prints them after
/// `privacy: ` (`NAME: ASSUMPTION`, several joined by `; `).
#[derive(Debug, Clone, Copy)]
pub struct Privacy(pub &'static [SchemeId]);

impl Privacy {
    /// The assumption of the one scheme `id`.
    pub fn of(id: SchemeId) -> Privacy {
        match lookup(id) {
            Some(entry) => Privacy(std::slice::from_ref(&entry.id)),
            None => Privacy(&[]),
        }
    }
}

impl fmt::Display for Privacy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no registered scheme: no privacy promise");
        }
        for (k, id) in self.0.iter().enumerate() {
            if k > 0 {
                f.write_str("; ")?;
            }
            match lookup(*id) {
                Some(entry) => write!(f, "{}: {}", entry.name, entry.assumption)?,
                None => write!(
                    f,
                    "{}: not a registered scheme, no privacy promise",
                    id.name()
                )?,
            }
        }
        Ok(())
    }
}

/// Width of the terminal renderings ([`help`], [`text`]); `pir --help` wraps at 100.
const WIDTH: usize = 96;

/// The privacy section of `pir --help`.
pub fn help() -> String {
    let mut out = String::from(
        "Privacy: what must hold for each scheme (read it before relying on `pir`):\n",
    );
    for entry in STANDARD {
        let title = format!(
            "{} ({}, {} server{}; {}):",
            entry.name,
            entry.family.name(),
            entry.servers,
            if entry.servers == Servers::Exactly(1) {
                ""
            } else {
                "s"
            },
            commands(entry)
        );
        wrap_into(&mut out, &title, 2);
        wrap_into(&mut out, entry.assumption, 6);
        wrap_into(&mut out, &format!("Security: {}.", entry.security), 6);
    }
    out.push_str("  Oblivious storage (pir oram, not PIR):\n");
    wrap_into(&mut out, OBLIVIOUS_STORAGE, 6);
    wrap_into(&mut out, MIRRORS_LEARN, 2);
    out.push_str("  `pir schemes` says what each scheme is for.\n");
    out
}

/// A lattice scheme's parameter sets, each with its own level (`pir_lattice::security`), for
/// `pir schemes`; nothing for the other schemes.
fn parameter_sets(out: &mut String, id: SchemeId) {
    let Ok(scheme) = LatticeScheme::from_id(id) else {
        return;
    };
    out.push_str("  parameter sets:\n");
    for set in security::sets(scheme) {
        let mut line = format!(
            "{}: {} classical, {} quantum core-SVP bits, {} estimator model",
            set.name, set.classical, set.quantum, set.estimator
        );
        if !set.meets_target() {
            line.push_str(&format!(", below {}", security::TARGET_BITS));
        }
        wrap_into(out, &line, 4);
    }
}

/// What `pir schemes` prints: every scheme's name, family, servers, purpose, assumption and
/// security level.
pub fn text() -> String {
    let mut out = String::new();
    for entry in STANDARD {
        out.push_str(&format!("{} ({})\n", entry.name, entry.id.name()));
        out.push_str(&format!("  family:    {}\n", entry.family.name()));
        out.push_str(&format!("  servers:   {}\n", entry.servers));
        out.push_str(&format!("  served by: {}\n", commands(entry)));
        out.push_str("  for:\n");
        wrap_into(&mut out, entry.purpose, 4);
        out.push_str("  privacy:\n");
        wrap_into(&mut out, entry.assumption, 4);
        out.push_str("  security:\n");
        wrap_into(&mut out, &entry.security.to_string(), 4);
        parameter_sets(&mut out, entry.id);
        out.push('\n');
    }
    out.push_str("Oblivious storage (pir oram; not PIR)\n  for:\n");
    wrap_into(&mut out, OBLIVIOUS_STORAGE_PURPOSE, 4);
    out.push_str("  privacy:\n");
    wrap_into(&mut out, OBLIVIOUS_STORAGE, 4);
    out.push_str("  security:\n");
    wrap_into(&mut out, OBLIVIOUS_STORAGE_SECURITY, 4);
    out.push('\n');
    wrap_into(&mut out, MIRRORS_LEARN, 0);
    out
}

/// The README's privacy table (`pir schemes --markdown`), without the markers around it.
pub fn markdown() -> String {
    let mut out = String::from(
        "| scheme | family | servers | what it is for | what must hold for privacy | security \
         level |\n\
         |---|---|---|---|---|---|\n",
    );
    for entry in STANDARD {
        out.push_str(&format!(
            "| **{}** (`{}`) | {} | {} | {} | {} | {} |\n",
            entry.name,
            entry.id.name(),
            entry.family.name(),
            entry.servers,
            sentence(entry.purpose),
            sentence(entry.assumption),
            sentence(&entry.security.to_string())
        ));
    }
    out.push_str(&format!(
        "| **Oblivious storage** (`pir oram`) | not PIR | 1 or more stores | {} | {} | {} |\n",
        sentence(OBLIVIOUS_STORAGE_PURPOSE),
        sentence(OBLIVIOUS_STORAGE),
        sentence(OBLIVIOUS_STORAGE_SECURITY)
    ));
    out
}

/// The commands that serve `entry`, joined.
fn commands(entry: &SchemeEntry) -> String {
    let names: Vec<&str> = entry.served_by.iter().map(|kind| kind.command()).collect();
    names.join(", ")
}

/// `clause` as a sentence: capital first letter, full stop at the end.
fn sentence(clause: &str) -> String {
    let mut chars = clause.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => String::new(),
    }
}

/// Appends `words` wrapped at [`WIDTH`], every line indented by `indent` spaces; an equation
/// (`q = 2^32`) stays on one line.
fn wrap_into(out: &mut String, words: &str, indent: usize) {
    const GLUE: char = '\u{1}';
    let glued = words.replace(" = ", &format!("{GLUE}={GLUE}"));
    let mut line = String::new();
    for word in glued.split_whitespace().map(|word| word.replace(GLUE, " ")) {
        let width = line.chars().count() + 1 + word.chars().count();
        if !line.is_empty() && indent + width > WIDTH {
            out.push_str(&format!("{:indent$}{line}\n", ""));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{:indent$}{line}\n", ""));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privacy_names_each_scheme_and_its_assumption() {
        let line = Privacy(&[SchemeId::Checklist, SchemeId::Dpf]).to_string();
        assert!(
            line.starts_with("Checklist: as long as the offline server"),
            "{line}"
        );
        assert!(
            line.contains("; DPF: as long as the two servers asked"),
            "{line}"
        );
        assert_eq!(
            Privacy::of(SchemeId::Chor).to_string(),
            format!("Chor: {}", STANDARD[0].assumption)
        );
        assert!(Privacy::of(SchemeId::Control)
            .to_string()
            .contains("no privacy promise"));
    }

    #[test]
    fn renderings_cover_every_scheme_within_the_width() {
        let (help, text, markdown) = (help(), text(), markdown());
        for entry in STANDARD {
            assert!(help.contains(&format!("  {} (", entry.name)), "{help}");
            assert!(text.contains(&format!("{} ({})", entry.name, entry.id.name())));
            assert!(markdown.contains(&format!("| **{}** (`", entry.name)));
        }
        for line in help.lines().chain(text.lines()) {
            assert!(line.chars().count() <= WIDTH, "too wide: {line}");
        }
        assert_eq!(markdown.lines().count(), STANDARD.len() + 3);
        assert!(
            help.contains("log2 q = 55.9"),
            "YPIR's caution is in the help"
        );
    }

    #[test]
    fn wrapping_keeps_every_word_in_order() {
        let mut out = String::new();
        let words = STANDARD[4].assumption;
        wrap_into(&mut out, words, 4);
        let rejoined: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(rejoined, words.split_whitespace().collect::<Vec<_>>());
        assert!(out.lines().count() > 1);
        assert!(out.lines().all(|line| line.starts_with("    ")));
    }
}
