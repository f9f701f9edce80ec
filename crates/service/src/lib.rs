//! `pir-service`: the transport-free service layer between the schemes and the network.
//!
//! Main items:
//! - [`Handler`]: what the runtime (`pir-server`) serves: request bytes in, reply bytes out,
//!   health, metrics, an optional hint download.
//! - [`SignedService`] ([`signed`]): the ONE signed-batch service. It decodes the envelope,
//!   checks the batch and the database id, has its [`Backend`] prepare each query, answers all
//!   queries of all concurrent requests in one [`Backend::answer_batch`], and signs each reply.
//! - Backends: [`mirror::Mirror`] (Chor and RAID-PIR over the XOR engine),
//!   [`lattice::Lattice`] (any single-server scheme of `pir-lattice`), [`qdp::Qdp`] (RAID-PIR
//!   with query-dependent preprocessing, its precompute worker and seed state),
//!   [`checklist::Checklist`] (Checklist's offline and online server roles, which also answer
//!   SinglePass and DPF), [`singlepass::SinglePass`] (SinglePass's two roles alone).
//! - The client twin: [`reply`] builds requests and checks replies (envelope, kind,
//!   signature, database id, count) once for every scheme; [`framing`] has the message sizes.
//! - [`registry`]: the one place a scheme is known: every scheme the `pir` binary serves, what
//!   it is for, the privacy assumption users must accept and which server commands serve it;
//!   `pir --help`, `pir schemes`, the README's privacy table and every `privacy:` line read
//!   it, and [`conformance`] runs each entry.
//! - [`shard`]: sharded serving (the signed shard map, row splits, how each scheme's parts
//!   combine, the front end's backend).
//! - [`Metrics`]: counters only (GUIDE section 7: nothing derived from a query).
//!
//! What it does not do: no tokio, no sockets, no TLS (the `pir-server` runtime moves the
//! bytes); no application knowledge (breach checks, records and updates build on it).

pub mod checklist;
pub mod conformance;
pub mod framing;
pub mod handler;
pub mod lattice;
pub mod metrics;
pub mod mirror;
pub mod qdp;
pub mod registry;
pub mod releases;
pub mod reply;
pub mod roles;
pub mod shard;
pub mod signed;
pub mod singlepass;

pub use handler::{Handler, Reply};
pub use lattice::{Lattice, LatticeDatabase, LatticeService};
pub use metrics::{Endpoint, Metrics};
pub use mirror::{Mirror, MirrorService};
pub use releases::{ReleaseInfo, ReleaseSet, ServedRelease};
pub use signed::{Backend, Refusal, SignedService, DATABASE_ID_LEN};
