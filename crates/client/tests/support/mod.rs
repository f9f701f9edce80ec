//! Shared parts of the client's integration tests: a transport that passes every exchange to
//! another one and lets the test look at (or damage) each reply on its way back.

use std::sync::Arc;

use pir_client::{Transport, TransportError};

/// What a [`Tap`] calls with each reply: the mirror, the request, the largest reply allowed,
/// and the reply (which it may change).
pub type OnReply = dyn Fn(usize, &[u8], usize, &mut Vec<u8>) + Send + Sync;

/// Passes every exchange to `inner`, then hands the reply to `on_reply`.
pub struct Tap<T> {
    pub inner: Arc<T>,
    pub on_reply: Box<OnReply>,
}

impl<T: Transport> Transport for Tap<T> {
    async fn exchange(
        &self,
        mirror: usize,
        request: Vec<u8>,
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        let mut reply = self
            .inner
            .exchange(mirror, request.clone(), max_reply)
            .await?;
        (self.on_reply)(mirror, &request, max_reply, &mut reply);
        Ok(reply)
    }
}
