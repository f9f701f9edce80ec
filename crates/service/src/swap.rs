//! A handler whose whole service is replaced at run time (a server's SIGHUP reload of a
//! database that changed on disk), without a restart.
//!
//! Requests already handed to the old service finish with it (they hold it); the next ones go
//! to the new one. The counters carry on: every service swapped in must count into the same
//! [`Metrics`] (build it with [`crate::SignedService::with_metrics`]).

use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::{Handler, Metrics, Reply};

/// The service being served, replaceable as a whole.
pub struct Swappable<H> {
    current: RwLock<Arc<H>>,
    metrics: Arc<Metrics>,
}

impl<H> std::fmt::Debug for Swappable<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Swappable").finish_non_exhaustive()
    }
}

impl<H: Handler> Swappable<H> {
    /// Serves `first`, which counts into `metrics`.
    pub fn new(first: H, metrics: Arc<Metrics>) -> Self {
        Self {
            current: RwLock::new(Arc::new(first)),
            metrics,
        }
    }

    /// The service requests go to now.
    pub fn current(&self) -> Arc<H> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Puts `next` (counting into the same metrics) in place of the current service, which is
    /// returned: it is dropped once the requests it is answering are done.
    pub fn swap(&self, next: H) -> Arc<H> {
        let mut current = self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::replace(&mut *current, Arc::new(next))
    }
}

impl<H: Handler> Handler for Swappable<H> {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        self.current().handle_many(requests)
    }
    fn max_request_bytes(&self) -> usize {
        self.current().max_request_bytes()
    }
    fn health(&self) -> String {
        self.current().health()
    }
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    fn render_metrics(&self) -> String {
        self.current().render_metrics()
    }
    fn hint(&self) -> Option<Bytes> {
        self.current().hint()
    }
    fn hint_of(&self, id: &[u8; 32]) -> Option<Bytes> {
        self.current().hint_of(id)
    }
    fn legacy_file(&self, name: &str) -> Option<Bytes> {
        self.current().legacy_file(name)
    }
    fn legacy_manifest(&self) -> Option<Bytes> {
        self.current().legacy_manifest()
    }
}
