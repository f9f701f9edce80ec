//! One interface for every single-server scheme: [`SingleServer`], [`SingleClient`], the
//! opaque [`QueryState`] and the [`Saved`] offline work. Each scheme implements the traits;
//! [`crate::dispatch`], above the schemes, maps a scheme to its implementation.
//!
//! Servers and clients above this crate (`pir-service`, `pir-client`) hold a
//! `Box<dyn SingleServer>` or `Box<dyn SingleClient>` and never match on the scheme.

use std::any::Any;
use std::time::Duration;

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
    /// Sets how long and how many bytes of clients' uploaded key material the server keeps
    /// (YPIR and YPIR+SP; a no-op for schemes without key material).
    fn set_key_policy(&self, _policy: KeyPolicy) -> Result<(), Error> {
        Ok(())
    }
}

/// The client side of a single-server scheme: the hint, queries and decoding.
pub trait SingleClient: Send + Sync {
    /// The hint header the client was built from.
    fn header(&self) -> &HintHeader;
    /// A query message for record `index` and what decoding its answer needs.
    fn query(&self, index: u64, rng: &mut dyn CryptoRng) -> Result<(QueryState, Vec<u8>), Error>;
    /// The record from the answer message to the query that made `state`.
    fn decode(&self, state: &QueryState, answer: &[u8]) -> Result<Vec<u8>, Error>;
    /// Called before the queries of one request (no scheme needs it since YPIR's keys are
    /// uploaded once per server, [`SingleClient::keys_lost`]; kept for callers).
    fn begin_request(&self) {}
    /// The server answered `pir_core::Error::UnknownKey` (wire code 6): it no longer holds the
    /// key material this client uploaded (expired, evicted, restarted). The next query uploads
    /// it again. A no-op for schemes without key material.
    fn keys_lost(&self) {}
    /// Bytes of key material the first query to a server carries and later queries do not (0
    /// for schemes without key material).
    fn key_bytes(&self) -> usize {
        0
    }
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

/// Implements [`SingleServer`] for a scheme's server: its `header` field, its own
/// `memory_bytes` and `answer_batch`, and, where given, `set_key_policy` on its key store
/// field `$keys`.
macro_rules! single_server {
    ($server:ty $(, $keys:ident)?) => {
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
            $(
                fn set_key_policy(
                    &self,
                    policy: $crate::single::KeyPolicy,
                ) -> Result<(), pir_core::Error> {
                    self.$keys.set_policy(policy)
                }
            )?
        }
    };
}
pub(crate) use single_server;

/// Implements [`SingleClient`] for a scheme's client: its `header` field, its own `query` and
/// `decode` with the query state (`$state`) boxed, and, where given, `keys_lost` and
/// `key_bytes` of its RLWE client field `$base`.
macro_rules! single_client {
    ($client:ty, $state:ty $(, $base:ident)?) => {
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
                fn keys_lost(&self) {
                    self.$base.keys_lost()
                }
                fn key_bytes(&self) -> usize {
                    self.$base.key_bytes()
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

/// How long and how many bytes of clients' uploaded key material (YPIR's one-time keys,
/// `crate::ypir::keys`) a server keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyPolicy {
    /// Uploaded keys are forgotten this long after their upload (a later query then gets
    /// `Error::UnknownKey` and the client uploads again). Also bounds how long a key id links
    /// a client's queries.
    pub expiry: Duration,
    /// Most bytes of uploaded keys (in the server's NTT form, about 590 KB per client) kept at
    /// once; the oldest uploads are forgotten first. An upload larger than the whole budget
    /// is refused (a budget of 0 turns uploads off).
    pub budget_bytes: usize,
}

impl Default for KeyPolicy {
    /// One hour and 128 MiB (about 220 clients).
    fn default() -> Self {
        Self {
            expiry: Duration::from_secs(3600),
            budget_bytes: 128 << 20,
        }
    }
}
