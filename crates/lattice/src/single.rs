//! One interface for every single-server scheme: [`SingleServer`], [`SingleClient`], the
//! opaque [`QueryState`] and the [`Saved`] offline work. Each scheme implements the traits;
//! [`crate::dispatch`], above the schemes, maps a scheme to its implementation.
//!
//! Servers and clients above this crate (`pir-service`, `pir-client`) hold a
//! `Box<dyn SingleServer>` or `Box<dyn SingleClient>` and never match on the scheme.

use std::any::Any;

use pir_core::Error;
use rand::CryptoRng;

use crate::wire::HintHeader;

/// The server side of a single-server scheme: the packed database and its answers.
pub trait SingleServer: Send + Sync + std::fmt::Debug {
    /// The hint header: scheme, shape, seeds and database version.
    fn header(&self) -> &HintHeader;
    /// Bytes the packed database occupies in memory.
    fn memory_bytes(&self) -> usize;
    /// Answers many query messages in one pass over the database where the scheme allows;
    /// a malformed query gets its own error.
    fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>>;
}

/// The client side of a single-server scheme: the hint, queries and decoding.
pub trait SingleClient: Send + Sync {
    /// The hint header the client was built from.
    fn header(&self) -> &HintHeader;
    /// A query message for record `index` and what decoding its answer needs.
    fn query(&self, index: u64, rng: &mut dyn CryptoRng) -> Result<(QueryState, Vec<u8>), Error>;
    /// The record from the answer message to the query that made `state`.
    fn decode(&self, state: &QueryState, answer: &[u8]) -> Result<Vec<u8>, Error>;
    /// Called before the queries of one request: a scheme whose later queries may refer to
    /// data sent with the first one of the request (YPIR's key id) starts over here.
    fn begin_request(&self) {}
}

/// What a client keeps between a query and its answer (opaque; each scheme knows its own).
pub struct QueryState(Box<dyn Any + Send + Sync>);

impl std::fmt::Debug for QueryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueryState { .. }")
    }
}

impl QueryState {
    pub(crate) fn of<T: Any + Send + Sync>(state: T) -> Self {
        Self(Box::new(state))
    }

    pub(crate) fn downcast<T: Any>(&self) -> Result<&T, Error> {
        self.0
            .downcast_ref()
            .ok_or_else(|| Error::InvalidParameter("query state of another scheme".into()))
    }
}

/// The offline work a server keeps next to its database so that a restart does not redo it:
/// the hint message clients download and the scheme's extra server state (DoublePIR: `H1`;
/// SimplePIR: none). The application stores it (with a checksum);
/// [`crate::dispatch::build_server_saved`]
/// checks that it belongs to the database being served before using it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    /// The hint message.
    pub hint: Vec<u8>,
    /// Extra server state (words).
    pub extra: Vec<u32>,
}

impl Saved {
    /// Checks the saved hint's header against `header` and the extra state's length; returns
    /// (extra, hint).
    pub(crate) fn check(
        self,
        header: &HintHeader,
        extra_words: usize,
    ) -> Result<(Vec<u32>, Vec<u8>), Error> {
        let (saved, _) = crate::wire::decode_hint(&self.hint, header.params.scheme)?;
        if saved != *header {
            return Err(Error::DatabaseMismatch(
                "the saved hint is for another database, seed or version".into(),
            ));
        }
        if self.extra.len() != extra_words {
            return Err(Error::DatabaseMismatch(
                "the saved server state has the wrong size".into(),
            ));
        }
        Ok((self.extra, self.hint))
    }
}
