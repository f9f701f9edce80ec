//! `pir-service`: the transport-free service layer between the schemes and the network.
//!
//! - [`Handler`]: what the runtime (`pir-server`) serves: request bytes in, reply bytes out,
//!   health, metrics, an optional hint download. No tokio, no sockets here.
//! - [`Service`] ([`mirror`]): the XOR mirror; [`LatticeService`] ([`lattice`]): single-server
//!   PIR; [`BreachService`] ([`qdp`]): RAID-PIR with query-dependent preprocessing.
//! - [`Metrics`]: counters only (GUIDE section 7: nothing derived from a query).

pub mod handler;
pub mod lattice;
pub mod metrics;
pub mod mirror;
pub mod qdp;

pub use handler::{Handler, Reply};
pub use lattice::{LatticeDatabase, LatticeService};
pub use metrics::Metrics;
pub use mirror::Service;
pub use qdp::{BoxedSeedStore, BreachConfig, BreachService, FileSeedStore, FlipTable};
