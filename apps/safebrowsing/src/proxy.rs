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
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::list::ListDatabase;
    use rand::SeedableRng;

    fn proxy() -> (Proxy, ListDatabase) {
        let (db, _) =
            ListDatabase::build("t", "evil.example\nbad.example/x.exe\nworse.example\n").unwrap();
        (Proxy::new(db.index()), db)
    }

    fn update_request(state: Vec<u8>) -> Vec<u8> {
        proto::FetchThreatListUpdatesRequest {
            client: None,
            list_update_requests: vec![proto::ListUpdateRequest {
                threat_type: proto::MALWARE_THREAT,
                platform_type: 2,
                threat_entry_type: proto::URL,
                state,
            }],
        }
        .encode_to_vec()
    }

    #[test]
    fn a_first_update_is_full_and_a_current_one_empty() {
        let (proxy, db) = proxy();
        let reply = proto::FetchThreatListUpdatesResponse::decode(
            &proxy.update(&update_request(Vec::new())).unwrap()[..],
        )
        .unwrap();
        let list = &reply.list_update_responses[0];
        assert_eq!(list.response_type, proto::FULL_UPDATE);
        let raw = list.additions[0].raw_hashes.as_ref().unwrap();
        assert_eq!(raw.prefix_size, 4);
        assert_eq!(raw.raw_hashes.len(), 12);
        assert_eq!(
            list.checksum.as_ref().unwrap().sha256,
            pir_keys::sha256(&raw.raw_hashes)
        );
        assert_eq!(list.new_client_state, db.index().state());
        let again = proto::FetchThreatListUpdatesResponse::decode(
            &proxy.update(&update_request(db.index().state())).unwrap()[..],
        )
        .unwrap();
        assert_eq!(
            again.list_update_responses[0].response_type,
            proto::PARTIAL_UPDATE
        );
        assert!(again.list_update_responses[0].additions.is_empty());
        assert!(proxy.update(b"\xff\xff\xff").is_err());
    }

    #[test]
    fn a_list_is_answered_once_per_request() {
        let (proxy, _) = proxy();
        let list = |threat_type: i32, platform_type: i32| proto::ListUpdateRequest {
            threat_type,
            platform_type,
            threat_entry_type: proto::URL,
            state: Vec::new(),
        };
        let request = |lists: Vec<proto::ListUpdateRequest>| {
            proto::FetchThreatListUpdatesRequest {
                client: None,
                list_update_requests: lists,
            }
            .encode_to_vec()
        };
        // Our list twice (even for another platform): refused, not answered twice.
        let twice = request(vec![
            list(proto::MALWARE_THREAT, 2),
            list(proto::MALWARE_THREAT, 1),
        ]);
        assert!(proxy.update(&twice).is_err());
        // 8,000 requests for other lists: refused.
        let many = request((0..8000).map(|k| list(100 + k, 2)).collect());
        assert!(proxy.update(&many).is_err());
        // Each list once, ours among them: answered, ours in full once.
        let once = request((0..7).map(|k| list(proto::MALWARE_THREAT + k, 2)).collect());
        let reply =
            proto::FetchThreatListUpdatesResponse::decode(&proxy.update(&once).unwrap()[..])
                .unwrap();
        assert_eq!(reply.list_update_responses.len(), 7);
        let full: usize = reply
            .list_update_responses
            .iter()
            .flat_map(|r| &r.additions)
            .map(|a| a.raw_hashes.as_ref().unwrap().raw_hashes.len())
            .sum();
        assert_eq!(full, 12);
    }

    #[test]
    fn full_hash_lookups_return_only_matching_records() {
        let (proxy, db) = proxy();
        let listed = crate::entry_hash("evil.example").unwrap();
        let request = proto::FindFullHashesRequest {
            client: None,
            client_states: vec![db.id().to_vec()],
            threat_info: Some(proto::ThreatInfo {
                threat_types: vec![proto::MALWARE_THREAT],
                platform_types: vec![2],
                threat_entry_types: vec![proto::URL],
                threat_entries: vec![
                    proto::ThreatEntry {
                        hash: listed[..4].to_vec(),
                        url: String::new(),
                    },
                    proto::ThreatEntry {
                        hash: vec![0, 0, 0, 1],
                        url: String::new(),
                    },
                ],
            }),
        }
        .encode_to_vec();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let plan = proxy.plan(&request, &mut rng).unwrap();
        // One record per prefix (no prefix repeats here), the second a random filler.
        assert_eq!(plan.fetches.len(), 2);
        let bucket = db.buckets()[0];
        assert!(plan.fetches.iter().all(|f| f.bucket == bucket.database_id));
        let fetched: Vec<[u8; 32]> = plan
            .fetches
            .iter()
            .map(|f| db.hashes()[f.position as usize])
            .collect();
        let reply =
            proto::FindFullHashesResponse::decode(&proxy.full_hashes(&plan, &fetched)[..]).unwrap();
        assert_eq!(reply.matches.len(), 1);
        assert_eq!(reply.matches[0].threat.as_ref().unwrap().hash, listed);
        assert_eq!(reply.matches[0].threat_type, proto::MALWARE_THREAT);
        assert_eq!(reply.matches[0].platform_type, 2);
    }

    /// What a v4 client does with an update: removals by index, then additions merged.
    fn apply(prefixes: &mut Vec<[u8; 4]>, list: &proto::ListUpdateResponse) {
        if list.response_type == proto::FULL_UPDATE {
            prefixes.clear();
        }
        for set in &list.removals {
            let indices = &set.raw_indices.as_ref().unwrap().indices;
            assert!(indices.windows(2).all(|w| w[0] < w[1]));
            for &i in indices.iter().rev() {
                prefixes.remove(i as usize);
            }
        }
        for set in &list.additions {
            let raw = set.raw_hashes.as_ref().unwrap();
            prefixes.extend(
                raw.raw_hashes
                    .chunks_exact(4)
                    .map(|c| <[u8; 4]>::try_from(c).unwrap()),
            );
        }
        prefixes.sort_unstable();
        assert_eq!(
            list.checksum.as_ref().unwrap().sha256,
            pir_keys::sha256(&prefixes.concat()),
            "the checksum the browser verifies"
        );
    }

    #[test]
    fn a_browser_behind_gets_a_partial_update_that_checks_out() {
        let text = |range: std::ops::Range<usize>| -> String {
            range.map(|k| format!("h{k}.example\n")).collect()
        };
        let (v0, _) = ListDatabase::build_with("t", &text(0..30), Some(2)).unwrap();
        let mut proxy = Proxy::new(v0.index());
        let fetch = |proxy: &Proxy, state: Vec<u8>| {
            proto::FetchThreatListUpdatesResponse::decode(
                &proxy.update(&update_request(state)).unwrap()[..],
            )
            .unwrap()
            .list_update_responses
            .remove(0)
        };
        let mut browser = Vec::new();
        let first = fetch(&proxy, Vec::new());
        apply(&mut browser, &first);
        let mut state = first.new_client_state;
        let (v1, _, _) = v0.update(&text(5..33)).unwrap();
        let (v2, _, _) = v1.update(&text(7..40)).unwrap();
        proxy.replace(v1.index());
        proxy.replace(v2.index());
        // Two versions behind: a partial update with removals and additions.
        let partial = fetch(&proxy, state.clone());
        assert_eq!(partial.response_type, proto::PARTIAL_UPDATE);
        assert_eq!(
            partial.removals[0]
                .raw_indices
                .as_ref()
                .unwrap()
                .indices
                .len(),
            7
        );
        assert_eq!(
            partial.additions[0]
                .raw_hashes
                .as_ref()
                .unwrap()
                .raw_hashes
                .len(),
            4 * 10
        );
        apply(&mut browser, &partial);
        assert_eq!(browser, v2.index().distinct());
        state = partial.new_client_state;
        assert_eq!(state, v2.index().state());
        // Current: empty; unknown state: full.
        let current = fetch(&proxy, state);
        assert!(current.additions.is_empty() && current.removals.is_empty());
        let unknown = fetch(&proxy, b"some other state".to_vec());
        assert_eq!(unknown.response_type, proto::FULL_UPDATE);
        let mut fresh = Vec::new();
        apply(&mut fresh, &unknown);
        assert_eq!(fresh, browser);
    }

    #[test]
    fn lookups_ask_every_bucket_the_same_number_of_times() {
        let text = |range: std::ops::Range<usize>| -> String {
            range.map(|k| format!("h{k}.example\n")).collect()
        };
        let (v0, _) = ListDatabase::build_with("t", &text(0..30), Some(2)).unwrap();
        let (v1, _, _) = v0.update(&text(3..34)).unwrap();
        assert!(v1.buckets().len() >= 2);
        let proxy = Proxy::new(v1.index());
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        let request = |host: &str| {
            let hash = crate::entry_hash(host).unwrap();
            proto::FindFullHashesRequest {
                client: None,
                client_states: vec![],
                threat_info: Some(proto::ThreatInfo {
                    threat_types: vec![proto::MALWARE_THREAT],
                    platform_types: vec![2],
                    threat_entry_types: vec![proto::URL],
                    threat_entries: vec![proto::ThreatEntry {
                        hash: hash[..4].to_vec(),
                        url: String::new(),
                    }],
                }),
            }
            .encode_to_vec()
        };
        let by_bucket = |plan: &Plan| -> Vec<usize> {
            v1.buckets()
                .iter()
                .map(|b| {
                    plan.fetches
                        .iter()
                        .filter(|f| f.bucket == b.database_id)
                        .count()
                })
                .collect()
        };
        // An old host (first bucket), a new one (last bucket), a removed one, an unlisted one:
        // the same fetches per bucket; only listed hosts match.
        let shapes: Vec<Vec<usize>> = ["h10.example", "h33.example", "h0.example", "x.example"]
            .iter()
            .map(|host| {
                let plan = proxy.plan(&request(host), &mut rng).unwrap();
                let all = v1.buckets();
                let fetched: Vec<[u8; 32]> = plan
                    .fetches
                    .iter()
                    .map(|f| {
                        let b = all.iter().find(|b| b.database_id == f.bucket).unwrap();
                        let k = f.position as usize;
                        b.records[32 * k..32 * k + 32].try_into().unwrap()
                    })
                    .collect();
                let reply =
                    proto::FindFullHashesResponse::decode(&proxy.full_hashes(&plan, &fetched)[..])
                        .unwrap();
                let listed = *host == "h10.example" || *host == "h33.example";
                assert_eq!(reply.matches.len(), usize::from(listed), "{host}");
                by_bucket(&plan)
            })
            .collect();
        assert!(shapes.windows(2).all(|w| w[0] == w[1]), "{shapes:?}");
    }

    #[test]
    fn each_list_is_answered_with_its_own_threat_type() {
        use crate::list::Threat;
        let sources = [
            (Threat::Malware, "evil.example\nboth.example\n"),
            (Threat::Phishing, "phish.example\nboth.example\n"),
        ];
        let (db, _) = ListDatabase::build_lists("two", &sources, None).unwrap();
        let proxy = Proxy::new(db.index());
        assert_eq!(
            proxy.missing().to_string(),
            "unwanted, download, download-allow"
        );
        // Updates: each list its own prefixes and checksum; a list without a source empty.
        let request = proto::FetchThreatListUpdatesRequest {
            client: None,
            list_update_requests: [
                proto::MALWARE_THREAT,
                proto::SOCIAL_ENGINEERING,
                proto::UNWANTED_SOFTWARE,
            ]
            .iter()
            .map(|&threat_type| proto::ListUpdateRequest {
                threat_type,
                platform_type: 2,
                threat_entry_type: proto::URL,
                state: Vec::new(),
            })
            .collect(),
        }
        .encode_to_vec();
        let reply =
            proto::FetchThreatListUpdatesResponse::decode(&proxy.update(&request).unwrap()[..])
                .unwrap();
        let sizes: Vec<usize> = reply
            .list_update_responses
            .iter()
            .map(|r| {
                let mut prefixes = Vec::new();
                apply(&mut prefixes, r);
                prefixes.len()
            })
            .collect();
        assert_eq!(sizes, [2, 2, 0]);
        // Lookups: the same fetches whatever list is asked about; a match carries the
        // threat type of each list its hash is on, among those asked.
        let find = |host: &str, threat_types: Vec<i32>| {
            let hash = crate::entry_hash(host).unwrap();
            let request = proto::FindFullHashesRequest {
                client: None,
                client_states: vec![],
                threat_info: Some(proto::ThreatInfo {
                    threat_types,
                    platform_types: vec![2],
                    threat_entry_types: vec![proto::URL],
                    threat_entries: vec![proto::ThreatEntry {
                        hash: hash[..4].to_vec(),
                        url: String::new(),
                    }],
                }),
            }
            .encode_to_vec();
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
            let plan = proxy.plan(&request, &mut rng).unwrap();
            let records = db.buckets()[0].records;
            let fetched: Vec<[u8; 32]> = plan
                .fetches
                .iter()
                .map(|f| {
                    let k = f.position as usize;
                    records[32 * k..32 * k + 32].try_into().unwrap()
                })
                .collect();
            let reply =
                proto::FindFullHashesResponse::decode(&proxy.full_hashes(&plan, &fetched)[..])
                    .unwrap();
            let types: Vec<i32> = reply.matches.iter().map(|m| m.threat_type).collect();
            (plan.fetches.len(), types)
        };
        let phishing = find("phish.example", vec![proto::SOCIAL_ENGINEERING]);
        let malware = find("evil.example", vec![proto::MALWARE_THREAT]);
        let both = find(
            "both.example",
            vec![proto::MALWARE_THREAT, proto::SOCIAL_ENGINEERING],
        );
        let only_malware = find("both.example", vec![proto::MALWARE_THREAT]);
        assert_eq!(phishing, (1, vec![proto::SOCIAL_ENGINEERING]));
        assert_eq!(malware, (1, vec![proto::MALWARE_THREAT]));
        assert_eq!(
            both,
            (1, vec![proto::MALWARE_THREAT, proto::SOCIAL_ENGINEERING])
        );
        assert_eq!(only_malware, (1, vec![proto::MALWARE_THREAT]));
    }

    #[test]
    fn req_parameters_decode_in_every_base64_alphabet() {
        let message = update_request(vec![0xfb, 0xff, 0xfe]);
        let url = base64ct::Base64Url::encode_string(&message);
        let standard = base64ct::Base64::encode_string(&message).replace('+', "%2B");
        for encoded in [url.clone(), url.trim_end_matches('=').to_string(), standard] {
            let query = format!("$ct=application/x-protobuf&$req={encoded}&key=x");
            assert_eq!(request_bytes(Some(&query), b"").unwrap(), message);
        }
        assert_eq!(request_bytes(None, &message).unwrap(), message);
        assert!(request_bytes(Some("$req=!!!"), b"").is_err());
    }
}
