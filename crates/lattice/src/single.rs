//! One interface for every single-server scheme: [`SingleServer`], [`SingleClient`], the
//! opaque [`QueryState`] and the [`Saved`] offline work. Each scheme implements the traits;
//! [`crate::dispatch`], above the schemes, maps a scheme to its implementation.
//!
//! Servers and clients above this crate (`pir-service`, `pir-client`) hold a
//! `Box<dyn SingleServer>` or `Box<dyn SingleClient>` and never match on the scheme.

use std::any::Any;

use pir_core::Error;
use rand::CryptoRng;

use crate::params::{Params, Scheme};
use crate::prg::Seed;
use crate::wire::{DbVersion, HintHeader};

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

/// Implements `Debug` for a client's query state as its name alone: it holds LWE secrets and
/// the record asked for, which must never reach a log.
macro_rules! redacted_debug {
    ($state:ty) => {
        impl std::fmt::Debug for $state {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(concat!(stringify!($state), " { .. }"))
            }
        }
    };
}
pub(crate) use redacted_debug;

/// Implements [`SingleServer`] for a scheme's server: its `header` field, and its own
/// `memory_bytes` and `answer_batch`.
macro_rules! single_server {
    ($server:ty) => {
        impl $crate::single::SingleServer for $server {
            fn header(&self) -> &$crate::wire::HintHeader {
                &self.header
            }
            fn memory_bytes(&self) -> usize {
                <$server>::memory_bytes(self)
            }
            fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, pir_core::Error>> {
                <$server>::answer_batch(self, queries)
            }
        }
    };
}
pub(crate) use single_server;

/// Implements [`SingleClient`] for a scheme's client: its `header` field, its own `query` and
/// `decode` with the query state (`$state`) boxed, and, where given, `begin_request` as
/// `$begin(self)`.
macro_rules! single_client {
    ($client:ty, $state:ty $(, $begin:expr)?) => {
        impl $crate::single::SingleClient for $client {
            fn header(&self) -> &$crate::wire::HintHeader {
                &self.header
            }
            fn query(
                &self,
                index: u64,
                rng: &mut dyn rand::CryptoRng,
            ) -> Result<($crate::single::QueryState, Vec<u8>), pir_core::Error> {
                let (state, message) = <$client>::query(self, index, &mut &mut *rng)?;
                Ok(($crate::single::QueryState::of(state), message))
            }
            fn decode(
                &self,
                state: &$crate::single::QueryState,
                answer: &[u8],
            ) -> Result<Vec<u8>, pir_core::Error> {
                <$client>::decode(self, state.downcast::<$state>()?, answer)
            }
            $(
                fn begin_request(&self) {
                    let begin: fn(&$client) = $begin;
                    begin(self)
                }
            )?
        }
    };
}
pub(crate) use single_client;

/// What a client keeps between a query and its answer (opaque; each scheme knows its own).
pub struct QueryState(Box<dyn Any + Send + Sync>);

redacted_debug!(QueryState);

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

/// What a server of any scheme is built from (each scheme's `build`; [`crate::dispatch`] picks
/// the scheme from `params`).
pub struct BuildInput<'a> {
    /// The database shape.
    pub params: Params,
    /// The bit string of `params.records` records (`params.database_bytes()` bytes).
    pub records: &'a [u8],
    /// The public seeds: `A` (or `A1`) from the first, the second only where
    /// [`Scheme::two_seeds`]. Generate them once with a CSPRNG and keep them with the
    /// database: the same seeds and records give the same hint after a restart.
    pub seeds: [Seed; 2],
    /// The database version (the digest the caller computes).
    pub version: DbVersion,
    /// The offline work saved from an earlier build, if any: used when it belongs to this
    /// database, else an error (the caller builds without it).
    pub saved: Option<Saved>,
    /// `progress(done, total)`, following the offline work.
    pub progress: &'a mut dyn FnMut(u64, u64),
}

impl BuildInput<'_> {
    /// The database's hint header, after checking that the parameters are for `scheme`.
    pub(crate) fn header(&self, scheme: Scheme) -> Result<HintHeader, Error> {
        if self.params.scheme != scheme {
            return Err(Error::InvalidParameter(format!(
                "parameters are not for {}",
                scheme.id().name()
            )));
        }
        Ok(HintHeader {
            params: self.params,
            seed: self.seeds[0],
            seed2: scheme.two_seeds().then_some(self.seeds[1]),
            version: self.version,
        })
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
