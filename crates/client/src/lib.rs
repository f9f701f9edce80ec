//! `pir-client`: fetch blocks privately from several mirrors.
//!
//! Main items:
//! - [`exchange()`] ([`mod@exchange`]): the one call sequence every client below uses: build the
//!   request envelope, send it through a [`Transport`], check the reply, return the answers.
//! - [`Transport`]: how one request envelope reaches mirror `i` and its reply comes back;
//!   [`HttpsTransport`] is the real one (TLS 1.3 pinned to each mirror's key from the signed
//!   mirror list). [`LocalTransport`] calls in-process servers directly (tests, examples).
//!   A [`Tap`] wraps either and shows each reply to a callback: the demo and the load
//!   generator record what servers were sent, tests play broken servers.
//! - [`retrieve()`]: runs a [`pir_core::MultiServerScheme`] over the mirrors, checks every
//!   answer's signature and every block against a caller-supplied check (the manifest hash),
//!   goes around mirrors that are down, and when a block is wrong, finds which mirror lied by
//!   re-asking with that mirror swapped for a spare, keeping its signed answer as [`Evidence`].
//! - [`LatticeSession`] ([`lattice`]): single-server PIR (SimplePIR, DoublePIR): the hint,
//!   cached per server key and database version, and signed answers from one server.
//! - [`ChecklistSession`] ([`checklist`]): Checklist's offline/online PIR: hints from the
//!   offline server, saved per database, lookups answered by both servers at once; the same
//!   session looks records up by SinglePass ([`singlepass`]) or DPF instead ([`LookupScheme`]).
//! - [`Evidence`]: a mirror's signed request/answer pair that anyone holding the release can
//!   check ([`evidence::check`]).
//!
//! Every reply is checked by `pir-service`'s client twin ([`pir_service::reply::open`]), in
//! [`exchange()`] only: envelope, kind, signature over the exact request, database id, answer
//! count.
//!
//! What it does not do: parse manifests or mirror lists (the application does), or write files
//! other than the hint cache and the Checklist state file.

pub mod checklist;
pub mod error;
pub mod evidence;
pub mod exchange;
pub mod lattice;
pub mod retrieve;
pub mod servers_file;
pub mod singlepass;
pub mod transport;

pub use checklist::{ChecklistSession, LookupScheme};
pub use error::SessionError;
pub use evidence::{Evidence, Verdict};
pub use exchange::{exchange, exchange_pair, resend, Call, ExchangeError, Exchanged};
pub use lattice::LatticeSession;
pub use retrieve::{
    retrieve, retrieve_with_roles, FetchError, Incident, MirrorInfo, MirrorStats, Retrieval,
    RetrieveOptions,
};
pub use transport::{
    fetch_manifest, fetch_manifest_of, fetch_releases, HttpsTransport, LocalTransport, OnReply,
    Recorded, Tap, Timeouts, Transport, TransportError,
};
