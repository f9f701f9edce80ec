//! The logic of `pir safebrowsing proxy`: the two Safe Browsing v4 calls a browser makes,
//! answered locally, with no hash prefix ever leaving the machine.
//!
//! - `threatListUpdates:fetch` ([`Proxy::update`]): each list's 4-byte prefixes (from the index
//!   downloaded in the clear from the offline server: the lists are public). A browser whose
//!   state names a version the proxy knew gets a partial update (the indices to remove from
//!   its sorted prefixes, then the prefixes to add), a browser with an unknown state a full
//!   update, a current one an empty partial update; the checksum is the SHA-256 of the sorted
//!   prefixes, which the browser verifies. A list the database has no source for is answered
//!   empty (and the proxy says so at start and in `/health`).
//! - `fullHashes:find` ([`Proxy::plan`], then [`Proxy::full_hashes`]): for each prefix the
//!   browser asks about, the proxy fetches *privately*, from every bucket, the records (full
//!   hashes) holding that prefix, always [`IndexBucket::max_per_prefix`] of them per bucket
//!   (random ones to fill up), and returns those that match, once per list they are on
//!   (the list's `ThreatType`, so that Firefox shows the page of that list). All lists share
//!   the buckets: what is fetched does not depend on the list the browser asks about.
//!
//! What the servers learn: that a lookup happened and how many prefixes it carried (almost
//! always one: the browser asks only after a local prefix match), never which. The private
//! lookups and the HTTP requests are [`crate::local`]'s; this module only reads and writes the
//! messages, so it is tested without a network.

use base64ct::Encoding;
use prost::Message;
use rand::Rng;

use std::collections::VecDeque;

use crate::list::{IndexBucket, ListIndex, Lists, Threat, PREFIX_BYTES};
use crate::proto;

/// Most prefixes one `fullHashes:find` may ask about (a URL has at most 30 expressions).
pub const MAX_PREFIXES_PER_REQUEST: usize = 32;
/// Largest request accepted (a browser's are a few hundred bytes).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// How long the browser may cache an answer, positive or negative (seconds).
pub const CACHE_SECONDS: i64 = 300;
/// Earlier versions kept, so that a browser a few updates behind gets a partial update.
pub const HISTORY: usize = 16;
/// Most list requests one `threatListUpdates:fetch` may carry: the v4 API has fewer threat
/// types than this, and Firefox asks once per list (five for Google's default provider).
pub const MAX_LIST_REQUESTS: usize = 16;

/// Why a request cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The request is not a valid v4 message (HTTP 400).
    #[error("bad request: {0}")]
    BadRequest(String),
}

/// The protobuf bytes of a request: the `$req` parameter of the URL (base64, as Firefox sends
/// it) if present, else the body.
pub fn request_bytes(query: Option<&str>, body: &[u8]) -> Result<Vec<u8>, ProxyError> {
    let encoded = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            (name == "$req" || name == "%24req").then_some(value)
        });
    let bytes = match encoded {
        Some(value) => {
            let value = percent_decode(value);
            let value = value.trim_end_matches('=');
            base64ct::Base64UrlUnpadded::decode_vec(value)
                .or_else(|_| base64ct::Base64Unpadded::decode_vec(value))
                .map_err(|_| ProxyError::BadRequest("$req is not base64".into()))?
        }
        None => body.to_vec(),
    };
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(ProxyError::BadRequest(format!(
            "{} bytes; at most {MAX_REQUEST_BYTES}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One private fetch: record `position` of the bucket queries name `bucket`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetch {
    /// The bucket's id (what its queries name).
    pub bucket: [u8; 32],
    /// Position in the bucket.
    pub position: u64,
}

/// The records to fetch for one `fullHashes:find`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Per prefix asked: the prefix and, per bucket, how many of its slots are real records.
    prefixes: Vec<(Vec<u8>, Vec<usize>)>,
    /// Slots per prefix and bucket (the bucket's `max_per_prefix`, fixed by the index).
    per_bucket: Vec<usize>,
    /// Records to fetch privately: per prefix, per bucket, its slots, real ones first.
    pub fetches: Vec<Fetch>,
    /// The lists of each fetch's record (none for a filler).
    lists: Vec<Lists>,
    /// The lists the browser asked about.
    wanted: Lists,
    platform_type: i32,
}

/// Each served list's distinct prefixes, sorted.
type Prefixes = Vec<(Threat, Vec<[u8; PREFIX_BYTES]>)>;

fn prefixes(index: &ListIndex) -> Prefixes {
    index
        .sources()
        .iter()
        .map(|t| (t, index.distinct_of(t)))
        .collect()
}

fn prefixes_of(all: &Prefixes, threat: Threat) -> &[[u8; PREFIX_BYTES]] {
    all.iter()
        .find(|(t, _)| *t == threat)
        .map_or(&[], |(_, p)| p.as_slice())
}

/// The proxy's view of the lists.
#[derive(Debug, Clone)]
pub struct Proxy {
    index: ListIndex,
    distinct: Prefixes,
    /// Earlier versions: (state, each list's sorted distinct prefixes), newest last.
    history: VecDeque<(Vec<u8>, Prefixes)>,
}

impl Proxy {
    /// A proxy for the lists `index` describes.
    pub fn new(index: ListIndex) -> Self {
        Self {
            distinct: prefixes(&index),
            index,
            history: VecDeque::new(),
        }
    }

    /// The lists Firefox uses that the database has no source for (served empty).
    pub fn missing(&self) -> Lists {
        let mut missing = Lists::ALL;
        self.index.sources().iter().for_each(|t| missing.remove(t));
        missing
    }

    /// The list now.
    pub fn index(&self) -> &ListIndex {
        &self.index
    }

    /// Switches to a newer version of the list; browsers on the old one get partial updates.
    pub fn replace(&mut self, index: ListIndex) {
        let old_state = self.index.state();
        let old = std::mem::replace(&mut self.distinct, prefixes(&index));
        self.history.push_back((old_state, old));
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
        self.index = index;
    }

    /// Answers a `FetchThreatListUpdatesRequest`: every list the browser asks about gets a
    /// response, holding that list's prefixes if the database has a source for it, else empty.
    ///
    /// A request may ask about each threat type once, and about at most
    /// [`MAX_LIST_REQUESTS`] lists: otherwise one small request could ask for the full prefix
    /// list thousands of times (a response 1,500 times its size).
    pub fn update(&self, request: &[u8]) -> Result<Vec<u8>, ProxyError> {
        let request = proto::FetchThreatListUpdatesRequest::decode(request)
            .map_err(|e| ProxyError::BadRequest(e.to_string()))?;
        let lists = &request.list_update_requests;
        if lists.len() > MAX_LIST_REQUESTS {
            return Err(ProxyError::BadRequest(format!(
                "{} list requests; at most {MAX_LIST_REQUESTS}",
                lists.len()
            )));
        }
        for (k, list) in lists.iter().enumerate() {
            if lists[..k].iter().any(|l| l.threat_type == list.threat_type) {
                return Err(ProxyError::BadRequest(format!(
                    "threat type {} asked for twice; ask for each list once",
                    list.threat_type
                )));
            }
        }
        let state = self.index.state();
        let responses = lists
            .iter()
            .map(|list| {
                let served = Threat::of_threat_type(list.threat_type)
                    .filter(|t| self.index.sources().contains(*t));
                self.list_update(list, served, &state)
            })
            .collect();
        Ok(proto::FetchThreatListUpdatesResponse {
            list_update_responses: responses,
            minimum_wait_duration: Some(proto::Duration {
                seconds: CACHE_SECONDS,
                nanos: 0,
            }),
        }
        .encode_to_vec())
    }

    /// The response to one list request: list `served`'s prefixes (none if not served).
    fn list_update(
        &self,
        list: &proto::ListUpdateRequest,
        served: Option<Threat>,
        state: &[u8],
    ) -> proto::ListUpdateResponse {
        let now = served.map_or(&[][..], |t| prefixes_of(&self.distinct, t));
        let (response_type, additions, removals) = if served.is_none() {
            (proto::FULL_UPDATE, Vec::new(), Vec::new())
        } else if list.state == state {
            (proto::PARTIAL_UPDATE, Vec::new(), Vec::new())
        } else if let Some((_, old)) = self.history.iter().find(|(s, _)| *s == list.state) {
            let old = served.map_or(&[][..], |t| prefixes_of(old, t));
            let (removals, additions) = diff(old, now);
            (proto::PARTIAL_UPDATE, additions, removals)
        } else {
            (proto::FULL_UPDATE, now.to_vec(), Vec::new())
        };
        proto::ListUpdateResponse {
            threat_type: list.threat_type,
            threat_entry_type: if list.threat_entry_type == 0 {
                proto::URL
            } else {
                list.threat_entry_type
            },
            platform_type: list.platform_type,
            response_type,
            additions: if additions.is_empty() {
                Vec::new()
            } else {
                vec![proto::ThreatEntrySet {
                    compression_type: proto::RAW,
                    raw_hashes: Some(proto::RawHashes {
                        prefix_size: PREFIX_BYTES as i32,
                        raw_hashes: additions.concat(),
                    }),
                    raw_indices: None,
                }]
            },
            removals: if removals.is_empty() {
                Vec::new()
            } else {
                vec![proto::ThreatEntrySet {
                    compression_type: proto::RAW,
                    raw_hashes: None,
                    raw_indices: Some(proto::RawIndices { indices: removals }),
                }]
            },
            new_client_state: if served.is_some() {
                state.to_vec()
            } else {
                b"empty".to_vec()
            },
            checksum: Some(proto::Checksum {
                sha256: pir_keys::sha256(&now.concat()).to_vec(),
            }),
        }
    }

    /// Reads a `FindFullHashesRequest` and picks the records to fetch.
    pub fn plan(&self, request: &[u8], rng: &mut impl Rng) -> Result<Plan, ProxyError> {
        let request = proto::FindFullHashesRequest::decode(request)
            .map_err(|e| ProxyError::BadRequest(e.to_string()))?;
        let info = request.threat_info.unwrap_or_default();
        if info.threat_entries.len() > MAX_PREFIXES_PER_REQUEST {
            return Err(ProxyError::BadRequest(format!(
                "{} prefixes; at most {MAX_PREFIXES_PER_REQUEST}",
                info.threat_entries.len()
            )));
        }
        let buckets = self.index.buckets();
        let per_bucket: Vec<usize> = buckets.iter().map(IndexBucket::max_per_prefix).collect();
        let mut wanted = Lists::NONE;
        info.threat_types
            .iter()
            .filter_map(|t| Threat::of_threat_type(*t))
            .for_each(|t| wanted.insert(t));
        if wanted.is_empty() {
            wanted = Lists::ALL;
        }
        let mut prefixes = Vec::new();
        let mut fetches = Vec::new();
        let mut lists = Vec::new();
        for entry in &info.threat_entries {
            let hash = &entry.hash;
            if hash.len() < PREFIX_BYTES || hash.len() > 32 {
                return Err(ProxyError::BadRequest(format!(
                    "a hash prefix of {} bytes",
                    hash.len()
                )));
            }
            let mut counts = Vec::with_capacity(buckets.len());
            for (bucket, &per) in buckets.iter().zip(&per_bucket) {
                let real = bucket.records_of(&hash[..PREFIX_BYTES]);
                let count = real.len().min(per);
                let fetch = |position: u64| Fetch {
                    bucket: bucket.database_id,
                    position,
                };
                fetches.extend(real.iter().take(count).map(|&k| fetch(k as u64)));
                lists.extend(real.iter().take(count).map(|&k| bucket.lists(k)));
                fetches
                    .extend((count..per).map(|_| fetch(rng.random_range(0..bucket.len() as u64))));
                lists.extend((count..per).map(|_| Lists::NONE));
                counts.push(count);
            }
            prefixes.push((hash.clone(), counts));
        }
        Ok(Plan {
            prefixes,
            per_bucket,
            fetches,
            lists,
            wanted,
            platform_type: info
                .platform_types
                .first()
                .copied()
                .unwrap_or(proto::ANY_PLATFORM),
        })
    }

    /// The `FindFullHashesResponse` once `plan.fetches` were fetched (`fetched[i]` is the
    /// record of `plan.fetches[i]`).
    pub fn full_hashes(&self, plan: &Plan, fetched: &[[u8; 32]]) -> Vec<u8> {
        let duration = || proto::Duration {
            seconds: CACHE_SECONDS,
            nanos: 0,
        };
        let mut matches = Vec::new();
        let mut slot = 0;
        for (prefix, counts) in &plan.prefixes {
            for (&count, &per) in counts.iter().zip(&plan.per_bucket) {
                let real = fetched.iter().zip(&plan.lists).skip(slot).take(count);
                for (hash, lists) in real.filter(|(hash, _)| hash.starts_with(prefix)) {
                    let on = lists.iter().filter(|t| plan.wanted.contains(*t));
                    matches.extend(on.map(|threat| proto::ThreatMatch {
                        threat_type: threat.threat_type(),
                        platform_type: plan.platform_type,
                        threat_entry_type: proto::URL,
                        threat: Some(proto::ThreatEntry {
                            hash: hash.to_vec(),
                            url: String::new(),
                        }),
                        cache_duration: Some(duration()),
                    }));
                }
                slot += per;
            }
        }
        proto::FindFullHashesResponse {
            matches,
            minimum_wait_duration: None,
            negative_cache_duration: Some(duration()),
        }
        .encode_to_vec()
    }
}

/// A v4 partial update from sorted `old` to sorted `new`: the indices of `old` to remove
/// (ascending), then the prefixes to add.
fn diff(
    old: &[[u8; PREFIX_BYTES]],
    new: &[[u8; PREFIX_BYTES]],
) -> (Vec<i32>, Vec<[u8; PREFIX_BYTES]>) {
    let (mut removals, mut additions) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                // Lists hold at most 2^26 entries (list::MAX_ENTRIES), so indices fit i32.
                removals.push(i as i32);
                i += 1;
            }
            (Some(_), None) => {
                removals.push(i as i32);
                i += 1;
            }
            (_, Some(b)) => {
                additions.push(*b);
                j += 1;
            }
            (None, None) => break,
        }
    }
    (removals, additions)
}

#[cfg(test)]
mod tests;
