//! One interface for every single-server scheme, and the one place that maps a [`Scheme`] to
//! its implementation ([`build_server`], [`open_client`]).
//!
//! Servers and clients above this crate (`pir-service`, `pir-client`) hold a
//! `Box<dyn SingleServer>` or `Box<dyn SingleClient>` and never match on the scheme; adding a
//! single-server scheme means implementing the two traits and adding one arm to each function
//! here.

use std::any::Any;

use pir_core::Error;
use rand::CryptoRng;

use crate::prg::Seed;
use crate::wire::{DbVersion, HintHeader};
use crate::{
    DoublePirClient, DoublePirServer, DoubleQueryState, Params, Scheme, SimplePirClient,
    SimplePirServer, SimpleQueryState,
};

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
/// SimplePIR: none). The application stores it (with a checksum); [`build_server_saved`]
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

/// [`build_server`], reusing `saved` offline work when it belongs to this database (else an
/// error: the caller recomputes). Also returns the offline work to save.
pub fn build_server_saved(
    params: Params,
    records: &[u8],
    seeds: [Seed; 2],
    version: DbVersion,
    saved: Option<Saved>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Box<dyn SingleServer>, Saved), Error> {
    Ok(match params.scheme {
        Scheme::SimplePir => {
            let (server, hint) =
                SimplePirServer::build(params, records, seeds[0], version, saved, progress)?;
            (
                Box::new(server),
                Saved {
                    hint,
                    extra: Vec::new(),
                },
            )
        }
        Scheme::DoublePir => {
            let (server, hint, h1) =
                DoublePirServer::build(params, records, seeds, version, saved, progress)?;
            (Box::new(server), Saved { hint, extra: h1 })
        }
        Scheme::Ypir => {
            let (server, hint, h1) =
                crate::ypir::YpirServer::build(params, records, seeds, version, saved, progress)?;
            (Box::new(server), Saved { hint, extra: h1 })
        }
        Scheme::YpirSp => {
            let (server, hint, masks) = crate::ypir::YpirSpServer::build(
                params, records, seeds[0], version, saved, progress,
            )?;
            (Box::new(server), Saved { hint, extra: masks })
        }
    })
}

/// Packs `records` for `params.scheme` and computes its hint (`progress(done, total)` follows
/// that pass). Returns the server and the hint message clients download.
pub fn build_server(
    params: Params,
    records: &[u8],
    seeds: [Seed; 2],
    version: DbVersion,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Box<dyn SingleServer>, Vec<u8>), Error> {
    Ok(match params.scheme {
        Scheme::SimplePir => {
            let (server, hint) =
                SimplePirServer::new(params, records, seeds[0], version, progress)?;
            (Box::new(server), hint)
        }
        Scheme::DoublePir => {
            let (server, hint) = DoublePirServer::new(params, records, seeds, version, progress)?;
            (Box::new(server), hint)
        }
        Scheme::Ypir => {
            let (server, hint, _) =
                crate::ypir::YpirServer::build(params, records, seeds, version, None, progress)?;
            (Box::new(server), hint)
        }
        Scheme::YpirSp => {
            let (server, hint, _) = crate::ypir::YpirSpServer::build(
                params, records, seeds[0], version, None, progress,
            )?;
            (Box::new(server), hint)
        }
    })
}

/// A client of `scheme` from its hint message.
pub fn open_client(scheme: Scheme, hint: &[u8]) -> Result<Box<dyn SingleClient>, Error> {
    Ok(match scheme {
        Scheme::SimplePir => Box::new(SimplePirClient::new(hint)?),
        Scheme::DoublePir => Box::new(DoublePirClient::new(hint)?),
        Scheme::Ypir => Box::new(crate::ypir::YpirClient::new(hint)?),
        Scheme::YpirSp => Box::new(crate::ypir::YpirSpClient::new(hint)?),
    })
}

impl SingleServer for SimplePirServer {
    fn header(&self) -> &HintHeader {
        SimplePirServer::header(self)
    }
    fn memory_bytes(&self) -> usize {
        SimplePirServer::memory_bytes(self)
    }
    fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        SimplePirServer::answer_batch(self, queries)
    }
}

impl SingleServer for DoublePirServer {
    fn header(&self) -> &HintHeader {
        DoublePirServer::header(self)
    }
    fn memory_bytes(&self) -> usize {
        DoublePirServer::memory_bytes(self)
    }
    fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        DoublePirServer::answer_batch(self, queries)
    }
}

impl SingleClient for SimplePirClient {
    fn header(&self) -> &HintHeader {
        SimplePirClient::header(self)
    }
    fn query(&self, index: u64, rng: &mut dyn CryptoRng) -> Result<(QueryState, Vec<u8>), Error> {
        let (state, query) = SimplePirClient::query(self, index, &mut &mut *rng)?;
        Ok((QueryState::of(state), query))
    }
    fn decode(&self, state: &QueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        SimplePirClient::decode(self, state.downcast::<SimpleQueryState>()?, answer)
    }
}

impl SingleClient for DoublePirClient {
    fn header(&self) -> &HintHeader {
        DoublePirClient::header(self)
    }
    fn query(&self, index: u64, rng: &mut dyn CryptoRng) -> Result<(QueryState, Vec<u8>), Error> {
        let (state, query) = DoublePirClient::query(self, index, &mut &mut *rng)?;
        Ok((QueryState::of(state), query))
    }
    fn decode(&self, state: &QueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        DoublePirClient::decode(self, state.downcast::<DoubleQueryState>()?, answer)
    }
}
