//! The global memory budget for buffered request bodies, and the one way a listener reads a
//! body: announced size checked, room reserved in the budget before a byte is buffered, the
//! whole body under one deadline.
//!
//! Every body a listener keeps in memory holds a [`Reservation`] of its size until the request
//! is answered, so the bodies of all connections together never pass the budget, however many
//! clients send at once. A body that does not fit waits for room until its deadline, then gets
//! 503. A body is not read from the socket before its room is reserved: the client of an
//! `Expect: 100-continue` request is not told to send it, and the bytes of the others wait in
//! the kernel's socket buffers, not in this process.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The budget's unit: room is reserved in whole KiB.
const UNIT: usize = 1024;

/// A shared budget of bytes for request bodies held in memory.
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    room: Arc<Semaphore>,
    units: usize,
    peak: Arc<AtomicUsize>,
}

/// What a budget holds now and held at most since it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetUse {
    /// The budget, in bytes.
    pub budget: usize,
    /// Bytes reserved by bodies held now.
    pub in_use: usize,
    /// Most bytes reserved at once so far.
    pub peak: usize,
}

/// Room reserved for one body; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
}

impl Reservation {
    /// Bytes reserved.
    pub fn bytes(&self) -> usize {
        self.permit.as_ref().map_or(0, |p| p.num_permits() * UNIT)
    }
}

/// Why a body was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// Announced or grown larger than the limit (413).
    TooLarge(usize),
    /// No room in the budget before the deadline (503).
    NoRoom,
    /// The body did not arrive before the deadline (408).
    TimedOut(Duration),
    /// The connection failed while the body was read (400; usually nobody is left to read it).
    Broken,
}

impl BodyError {
    /// The HTTP status and the text to answer with.
    pub fn status_and_text(&self) -> (u16, String) {
        match self {
            Self::TooLarge(limit) => (413, format!("a request body holds at most {limit} bytes\n")),
            Self::NoRoom => (
                503,
                "the server is receiving too many requests at once; try again shortly\n".into(),
            ),
            Self::TimedOut(after) => (
                408,
                format!(
                    "the request body did not arrive within {} s\n",
                    after.as_secs_f64()
                ),
            ),
            Self::Broken => (400, "the request body could not be read\n".into()),
        }
    }
}

impl MemoryBudget {
    /// A budget of `bytes` (rounded up to whole KiB; at least one KiB).
    pub fn new(bytes: usize) -> Self {
        let units = bytes.div_ceil(UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Self {
            room: Arc::new(Semaphore::new(units)),
            units,
            peak: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The budget in bytes.
    pub fn bytes(&self) -> usize {
        self.units * UNIT
    }

    /// What is held now and the most held so far.
    pub fn usage(&self) -> BudgetUse {
        let in_use = self.units - self.room.available_permits().min(self.units);
        BudgetUse {
            budget: self.bytes(),
            in_use: in_use * UNIT,
            peak: self.peak.load(Ordering::Relaxed) * UNIT,
        }
    }

    /// Adds room for `bytes` more to `held`, waiting until `deadline`.
    async fn reserve(
        &self,
        held: &mut Reservation,
        bytes: usize,
        deadline: Instant,
    ) -> Result<(), BodyError> {
        let have = held.permit.as_ref().map_or(0, |p| p.num_permits());
        let want = (have * UNIT + bytes).div_ceil(UNIT) - have;
        if want == 0 {
            return Ok(());
        }
        if have + want > self.units {
            // Larger than the whole budget: it would wait forever.
            return Err(BodyError::NoRoom);
        }
        let want = u32::try_from(want).map_err(|_| BodyError::NoRoom)?;
        let acquire = self.room.clone().acquire_many_owned(want);
        let permit = match tokio::time::timeout_at(deadline, acquire).await {
            Ok(Ok(permit)) => permit,
            _ => return Err(BodyError::NoRoom),
        };
        match &mut held.permit {
            Some(existing) => existing.merge(permit),
            None => held.permit = Some(permit),
        }
        let now = held.permit.as_ref().map_or(0, |p| p.num_permits());
        let in_use = self.units - self.room.available_permits().min(self.units);
        self.peak.fetch_max(in_use.max(now), Ordering::Relaxed);
        Ok(())
    }

    /// Reads `body` into memory: at most `limit` bytes (`announced` is its Content-Length, if
    /// any), room reserved before each part is buffered, everything within `timeout`. The
    /// reservation travels with the bytes; drop it when they are no longer held.
    pub async fn read<B>(
        &self,
        body: B,
        announced: Option<u64>,
        limit: usize,
        timeout: Duration,
    ) -> Result<(Bytes, Reservation), BodyError>
    where
        B: hyper::body::Body<Data = Bytes> + Unpin,
    {
        if announced.is_some_and(|len| len > limit as u64) {
            return Err(BodyError::TooLarge(limit));
        }
        let deadline = Instant::now() + timeout;
        let mut held = Reservation { permit: None };
        // Checked against `limit` just above, so it fits a usize.
        let announced = announced.map(|len| len as usize);
        if let Some(len) = announced {
            self.reserve(&mut held, len, deadline).await?;
        }
        let mut buffer = BytesMut::with_capacity(announced.unwrap_or(0));
        let mut body = body;
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => return Err(BodyError::TimedOut(timeout)),
                Ok(None) => break,
                Ok(Some(Err(_))) => return Err(BodyError::Broken),
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            if buffer.len() + data.len() > limit {
                return Err(BodyError::TooLarge(limit));
            }
            if buffer.len() + data.len() > held.bytes() {
                let more = buffer.len() + data.len() - held.bytes();
                self.reserve(&mut held, more, deadline).await?;
            }
            buffer.extend_from_slice(&data);
        }
        Ok((buffer.freeze(), held))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http_body_util::Full;

    fn full(bytes: usize) -> Full<Bytes> {
        Full::new(Bytes::from(vec![7u8; bytes]))
    }

    #[tokio::test]
    async fn bodies_hold_their_room_until_dropped() {
        let budget = MemoryBudget::new(10 * 1024);
        let second = Duration::from_secs(1);
        let (a, held_a) = budget
            .read(full(6000), Some(6000), 1 << 20, second)
            .await
            .unwrap();
        assert_eq!(a.len(), 6000);
        assert_eq!(budget.usage().in_use, 6 * 1024);
        // 6000 more do not fit next to the first: refused at the deadline.
        let short = Duration::from_millis(50);
        let refused = budget.read(full(6000), Some(6000), 1 << 20, short).await;
        assert_eq!(refused.unwrap_err(), BodyError::NoRoom);
        drop(held_a);
        assert_eq!(budget.usage().in_use, 0);
        let (_, held) = budget
            .read(full(6000), Some(6000), 1 << 20, second)
            .await
            .unwrap();
        assert_eq!(held.bytes(), 6 * 1024);
        assert_eq!(budget.usage().peak, 6 * 1024);
    }

    #[tokio::test]
    async fn limits_apply_to_announced_and_to_grown_bodies() {
        let budget = MemoryBudget::new(1 << 20);
        let second = Duration::from_secs(1);
        let announced = budget.read(full(10), Some(5000), 4096, second).await;
        assert_eq!(announced.unwrap_err(), BodyError::TooLarge(4096));
        // No length announced: the room grows with the parts, the limit still holds.
        let streamed = Parts((0..8).map(|_| Bytes::from(vec![1u8; 1000])).collect());
        let grown = budget.read(streamed, None, 4096, second).await;
        assert_eq!(grown.unwrap_err(), BodyError::TooLarge(4096));
        assert_eq!(
            budget.usage().in_use,
            0,
            "a refused body gives its room back"
        );
        // Larger than the whole budget: refused at once, not waited for.
        let small = MemoryBudget::new(2048);
        let whole = small.read(full(10), Some(4096), 1 << 20, second).await;
        assert_eq!(whole.unwrap_err(), BodyError::NoRoom);
    }

    /// A body of ready parts with no announced length (as a chunked upload arrives).
    struct Parts(std::collections::VecDeque<Bytes>);

    impl hyper::body::Body for Parts {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(hyper::body::Frame::data(b))))
        }
    }
}
