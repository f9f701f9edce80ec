//! `pir-updates`: private software updates, the first application of `pir`, after upPIR
//! (Cappos 2013).
//!
//! A vendor packs a release (a directory of files) into a database of equally sized blocks
//! and signs a manifest that lists the files and the SHA-256 of every block (section 4.1).
//! Mirrors serve the database with multi-server XOR PIR; a client fetches the blocks of the
//! files it needs without any single mirror learning which (section 4.3), and checks every
//! block against the manifest.
//!
//! Main types and functions:
//! - [`Manifest`] and [`FileEntry`]: the signed release manifest and its binary format.
//! - [`MirrorList`] and [`MirrorEntry`]: the signed list of mirrors and their keys.
//! - [`release::build`]: packs a directory into a release, choosing the block size
//!   (section 5.4) and optionally padding files to size classes (appendix A);
//!   [`release::open`]: memory-maps a release for a mirror and validates it (section 4.2);
//!   [`release_shards`]: the same release as shard parts and a signed shard map
//!   (`pir release build --shards`, served by `pir shard serve` and `pir front serve`).
//! - [`chunks`]: fetching from chunk-only RAID-PIR mirrors (which mirror plays which position).
//! - [`fetch`]: the client flow: verify the mirror list and manifest, retrieve a file
//!   privately through `pir-client`, check it, write it atomically, keep evidence.
//! - [`sample::write_sample_release`]: a deterministic demo corpus shaped like a Debian pool.
//! - [`command`]: the `pir` commands of this application (`release`, `mirror serve`,
//!   `mirror-list`, `fetch`, `evidence check`, `apt`, `demo`): their flags, the mirror as a
//!   server kind on `pir-host`, and what each command does.
//!
//! What it does not do: no PIR scheme code and no network runtime (the scheme crates and
//! `pir-server` do that; `command` starts them), no key management beyond loading the key
//! files it is given.

pub mod apt;
pub mod choose;
pub mod chunks;
pub mod command;
pub mod current_list;
pub mod error;
pub mod fetch;
pub mod freshness;
pub mod manifest;
pub mod mirrors;
pub mod release;
pub mod release_shards;
pub mod sample;
mod scheme_choice;
pub mod serve;
pub mod vendor;

#[cfg(test)]
mod testutil;

pub use error::UpdateError;
pub use manifest::{FileEntry, Manifest};
pub use mirrors::{MirrorEntry, MirrorList};
