//! `pir-server`: the network runtime of every `pir` server.
//!
//! [`runtime`] puts any [`pir_service::Handler`] on the network: HTTPS (TLS 1.3, rustls with
//! `ring`, the server's Ed25519 key as its identity), many concurrent clients, a batcher that
//! answers concurrent requests in one pass, a health endpoint that does not touch the database,
//! and optional plain-HTTP file downloads for legacy clients. It only moves bytes: decoding,
//! checking, answering and signing live in `pir-service`.
//!
//! What it does not do: parse release manifests or choose what to serve (the application and
//! the CLI do that), or keep any per-client state.

pub mod runtime;

pub use runtime::{
    start, RunningServer, ServerOptions, DEFAULT_BATCH_WINDOW, DEFAULT_BODY_TIMEOUT, DEFAULT_GRACE,
    DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_BATCH, DEFAULT_MAX_CONNECTIONS,
};
