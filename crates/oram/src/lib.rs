//! `pir-oram`: oblivious block storage on untrusted stores, the sans-I/O client core.
//!
//! A client keeps `N` blocks of `B` bytes on one or more stores it does not trust. Every
//! block is sealed (AES-256-GCM, bound to its place and write epoch), and the pattern of
//! slots read and written is independent of which blocks are read or written: this is the
//! partitioned ORAM of Stefanov, Shi and Song (NDSS 2012) as run by ObliviStore (Stefanov and
//! Shi, S&P 2013), with its concurrent batches, fake reads for blocks already in
//! flight, and background eviction.
//!
//! Main items:
//! - [`Geometry`] ([`params`]): partitions, levels, slots, with the constants and sources;
//! - [`Oram`] ([`oram`]): position map, partitions, eviction cache; batches and evictions
//!   as plans (extents to read) and completions (bytes back);
//! - [`state`]: the client state, encoded, checked and sealed;
//! - [`protocol`]: the slot-store protocol's message bodies;
//! - [`balance`]: the oblivious load balancer over several ORAM nodes (each node an ORAM of
//!   its own), as plans per node and replies back; [`node_protocol`]: its messages;
//! - [`SlotStore`] ([`store`]) and [`Client`] ([`client`]): the store contract and a
//!   synchronous driver.
//!
//! Privacy model: the client (its memory, its state file and `STATE.key`) is trusted; the
//! stores see slot numbers, sizes and timing only. What it does not do: files, sockets,
//! threads (the `pir-blockstore` crate has the file and network stores, the crash-safe
//! state file and the NBD export).

pub mod balance;
pub mod client;
pub mod error;
pub mod node_protocol;
pub mod oram;
pub mod params;
pub mod partition;
pub mod protocol;
pub mod seal;
pub mod state;
pub mod store;

pub use client::{Client, MAX_BATCH};
pub use error::OramError;
pub use oram::{Answer, Extent, Op, Oram, Request, Traffic};
pub use params::Geometry;
pub use store::{reuse_buffer, MemoryStore, SlotStore};
