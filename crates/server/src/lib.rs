//! `pir-server`: the network runtime of every `pir` server, and the bounded loopback listener
//! of the local proxies.
//!
//! [`runtime`] puts any [`pir_service::Handler`] on the network: HTTPS (TLS 1.3, rustls with
//! `ring`, the server's Ed25519 key as its identity), many concurrent clients, a batcher that
//! answers concurrent requests in one pass, a health endpoint that does not touch the database,
//! and optional plain-HTTP file downloads for legacy clients. It only moves bytes: decoding,
//! checking, answering and signing live in `pir-service`.
//!
//! [`local`] is the plain-HTTP listener on 127.0.0.1 or ::1 that the user's own proxies (Safe
//! Browsing, HIBP range) answer the browser and password managers on: it accepts only loopback
//! `Host` names and hands plain `http` requests to a handler the application provides.
//!
//! Both are bounded the same way: a connection cap fitted under the open-file limit
//! ([`limits`]), header, body and idle timeouts, a body-size limit, and a global memory budget
//! for the request bodies held at once ([`budget`]).
//!
//! What it does not do: parse release manifests or choose what to serve (the application and
//! the CLI do that), answer the proxies' requests (the applications do), or keep any
//! per-client state.

pub mod budget;
pub mod limits;
mod listener;
pub mod local;
pub mod runtime;

pub use budget::{BudgetUse, MemoryBudget};
pub use runtime::{
    start, RunningServer, ServerOptions, ADMIN_MAX_CONNECTIONS, DEFAULT_BATCH_WINDOW,
    DEFAULT_BODY_TIMEOUT, DEFAULT_GRACE, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_BATCH,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MEMORY_BUDGET,
};
