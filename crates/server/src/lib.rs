//! `pir-server`: what a mirror or a single-server PIR server runs.
//!
//! - [`Service`] is sans-I/O: it turns the bytes of one request into the bytes of one reply
//!   (a signed answer batch, the manifest, or an error), using the schemes of `pir-xor` over a
//!   [`pir_core::Database`]. It never logs or stores anything derived from a query; its
//!   [`Metrics`] count requests, queries, bytes and time only.
//! - [`LatticeService`] ([`lattice`]) is the sans-I/O single-server service: SimplePIR or
//!   DoublePIR from `pir-lattice`, its hint download, and signed answers, batching the
//!   queries of concurrent clients into one pass.
//! - [`BreachService`] ([`breach`]) is one of the two servers of a private credential check:
//!   RAID-PIR with query-dependent preprocessing over bucket blocks (a background worker keeps
//!   the queue of precomputed answers), and the blinding step on the server holding the key.
//! - [`runtime`] puts any [`Handler`] (a `Service` or a `LatticeService`) on the network: HTTPS (TLS 1.3, rustls with `ring`, the
//!   mirror's Ed25519 key as its identity), many concurrent clients, a bounded pool of scan
//!   workers, a health endpoint that does not touch the database, and optional plain-HTTP
//!   file downloads for legacy clients.
//!
//! What it does not do: parse release manifests or choose what to serve (the application and
//! the CLI do that), or keep any per-client state.

pub mod breach;
pub mod lattice;
pub mod metrics;
pub mod runtime;
pub mod service;

pub use breach::{BoxedSeedStore, BreachConfig, BreachService, FileSeedStore, FlipTable};
pub use lattice::{LatticeDatabase, LatticeService};
pub use metrics::Metrics;
pub use runtime::{
    start, Handler, RunningServer, ServerOptions, DEFAULT_BATCH_WINDOW, DEFAULT_MAX_BATCH,
};
pub use service::{Reply, Service};
