//! The contract between a sans-I/O service and the runtime that puts it on the network.

use bytes::Bytes;

use crate::Metrics;

/// A reply: an HTTP-like status and the envelope bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// 200 for answers and manifests, 400 for refused requests, 500 for internal failures.
    pub status: u16,
    /// A complete wire envelope.
    pub body: Vec<u8>,
}

/// What the runtime serves: a sans-I/O request handler. Everything it is asked is answered
/// from memory; the runtime owns the sockets, the threads and the batching. Every
/// [`crate::SignedService`] is one; `pir_client::LocalTransport` calls one in-process.
pub trait Handler: Send + Sync + 'static {
    /// Handles requests gathered by the batcher, in one pass over the database where the
    /// scheme allows; reply `i` answers request `i` exactly as if it had come alone.
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply>;
    /// Largest request body read; bigger ones are refused unread.
    fn max_request_bytes(&self) -> usize;
    /// The `/health` line; must not touch the database.
    fn health(&self) -> String;
    /// Whether to take traffic: `/health` answers 503 when not (a Kubernetes readiness
    /// probe); `/health/live` answers 200 regardless.
    fn ready(&self) -> bool {
        true
    }
    /// The counters behind `/metrics`.
    fn metrics(&self) -> &Metrics;
    /// The `/metrics` text: the counters and histograms, and the handler's own gauges.
    fn render_metrics(&self) -> String {
        self.metrics().render()
    }
    /// The hint served at `GET /pir/v1/hint`, if the scheme has one (a cheap clone).
    fn hint(&self) -> Option<Bytes> {
        None
    }
    /// The hint of the database `id` (`GET /pir/v1/hint/ID-HEX`), for a server of several
    /// databases; by default the one hint if it is for `id`'s database is unknown: none.
    fn hint_of(&self, _id: &[u8; 32]) -> Option<Bytes> {
        None
    }
    /// A file for the plain legacy listener, if registered (a copy: the release it comes
    /// from may be swapped while it is sent).
    fn legacy_file(&self, _name: &str) -> Option<Bytes> {
        None
    }
    /// The manifest for the plain legacy listener, if any.
    fn legacy_manifest(&self) -> Option<Bytes> {
        None
    }
}
