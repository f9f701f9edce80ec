//! `pir-safebrowsing`: private Safe Browsing. A browser's full-hash lookups go to a local proxy
//! that speaks the Safe Browsing v4 API and answers them by private lookups (Checklist, Kogan and Corrigan-Gibbs 2021)
//! from two servers, so no server ever sees a hash prefix of a visited site.
//!
//! - [`url`]: what a Safe Browsing v4 client hashes (canonicalization, host-suffix /
//!   path-prefix expressions, SHA-256 full hashes), so that lists built here match what
//!   Firefox asks for. [`canonicalize`] and [`expressions`] follow the "URLs and Hashing"
//!   section of the Safe Browsing v4 API documentation.
//! - [`list`]: the blocklists as the servers hold them ([`ListDatabase`]: sorted full hashes,
//!   one PIR record each whatever lists it is on, in waterfall buckets; one [`list::Threat`]
//!   per Firefox table: malware, phishing, unwanted software, download block and allow lists)
//!   and the [`ListIndex`] a proxy downloads in the clear.
//! - [`proto`]: the v4 API's Protocol Buffers messages that Firefox sends and reads.
//! - [`proxy`]: `threatListUpdates:fetch` and `fullHashes:find` answered locally, the full
//!   hashes fetched by private lookups ([`Proxy`]).
//! - [`local`]: the whole local proxy ([`LocalProxy`]): list index and private-lookup sessions
//!   (through `pir-client`), refreshes, and the browser's requests answered as plain `http`
//!   requests, with what a web page could send refused.
//! - [`shard`]: the list in S shards (`build --shards`): the map, the parts, and each
//!   shard's and front end's per-bucket backends (`pir shard serve`, `pir front serve`).
//! - [`command`]: `pir safebrowsing build|serve|servers|proxy|firefox-profile`: their flags,
//!   the two servers as a server kind on `pir-host`, the local proxy on `pir-server`'s bounded
//!   loopback listener, the servers file and the Firefox profile.
//!
//! What it does not do: no PIR scheme of its own and no network code of its own (the
//! services, the client sessions, the HTTPS runtime and the loopback HTTP listener are
//! `pir-service`'s, `pir-client`'s and `pir-server`'s).

pub mod command;
pub mod list;
pub mod local;
pub mod proto;
pub mod proxy;
pub mod shard;
pub mod shard_build;
#[cfg(feature = "testing")]
pub mod testing;
pub mod url;

pub use list::{ListDatabase, ListIndex};
pub use local::LocalProxy;
pub use proxy::Proxy;

pub use url::{
    canonicalize, entry_hash, expressions, full_hashes, Canonical, UrlError, MAX_URL_BYTES,
};
