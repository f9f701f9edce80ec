//! The one place that maps a [`Scheme`] to its implementation ([`build_server`],
//! [`open_client`]), above every scheme: adding a single-server scheme means implementing the
//! traits of [`crate::single`] and adding one arm to each function here.

use pir_core::Error;
use rand::CryptoRng;

use crate::double::{DoublePirClient, DoublePirServer, DoubleQueryState};
use crate::params::{Params, Scheme};
use crate::prg::Seed;
use crate::simple::{SimplePirClient, SimplePirServer, SimpleQueryState};
use crate::single::{QueryState, Saved, SingleClient, SingleServer};
use crate::wire::{DbVersion, HintHeader};
use crate::ypir::{YpirClient, YpirServer, YpirSpClient, YpirSpServer};

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
                YpirServer::build(params, records, seeds, version, saved, progress)?;
            (Box::new(server), Saved { hint, extra: h1 })
        }
        Scheme::YpirSp => {
            let (server, hint, masks) =
                YpirSpServer::build(params, records, seeds[0], version, saved, progress)?;
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
                YpirServer::build(params, records, seeds, version, None, progress)?;
            (Box::new(server), hint)
        }
        Scheme::YpirSp => {
            let (server, hint, _) =
                YpirSpServer::build(params, records, seeds[0], version, None, progress)?;
            (Box::new(server), hint)
        }
    })
}

/// A client of `scheme` from its hint message.
pub fn open_client(scheme: Scheme, hint: &[u8]) -> Result<Box<dyn SingleClient>, Error> {
    Ok(match scheme {
        Scheme::SimplePir => Box::new(SimplePirClient::new(hint)?),
        Scheme::DoublePir => Box::new(DoublePirClient::new(hint)?),
        Scheme::Ypir => Box::new(YpirClient::new(hint)?),
        Scheme::YpirSp => Box::new(YpirSpClient::new(hint)?),
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
