//! `pir-core`: the vocabulary every `pir` scheme shares.
//!
//! Main types:
//! - [`Database`]: `B` blocks of `b` bytes (`b` a multiple of 32) in one 64-byte-aligned region,
//!   owned on the heap or borrowed from a memory map supplied by the caller.
//! - [`MultiServerScheme`]: the shape of an n-server PIR scheme (one message per server from an
//!   index, one answer per server, decode).
//! - [`wire`]: the versioned, little-endian, length-checked envelope and codec that every message
//!   on the network uses.
//! - [`Codec`]: the one trait every binary format implements (encode to a [`wire::Writer`],
//!   decode from a checked [`wire::Reader`] with a context of what the bytes do not say).
//! - [`Error`]: one error enum that keeps "the peer sent bad bytes" apart from "the caller misused
//!   the API".
//!
//! What it does not do: no I/O of any kind (no sockets, files, threads or loggers), no `unsafe`,
//! and no concrete scheme (those live in `pir-xor`). Randomness is always passed in.

pub mod bits;
pub mod codec;
pub mod database;
pub mod error;
pub mod glossary;
pub mod prg;
pub mod protocol;
pub mod scheme;
pub mod wire;

pub use codec::Codec;
pub use database::{Database, DbShape, BLOCK_GRANULE, LINE};
pub use error::Error;
pub use scheme::{MultiServerScheme, SchemeId};
