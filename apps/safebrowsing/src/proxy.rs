//! The logic of `pir safebrowsing proxy`: the two Safe Browsing v4 calls a browser makes,
//! answered locally, with no hash prefix ever leaving the machine.
//!
//! - `threatListUpdates:fetch` ([`Proxy::update`]): the list's 4-byte prefixes (downloaded in
//!   the clear from the offline server: the list is public), as a full update the first time
//!   and an empty partial update while the client's state is current; the checksum is the
//!   SHA-256 of the sorted prefixes, which the browser verifies.
//! - `fullHashes:find` ([`Proxy::plan`], then [`Proxy::full_hashes`]): for each prefix the
//!   browser asks about, the proxy fetches *privately* the records (full hashes) holding that
//!   prefix, always [`PrefixList::max_per_prefix`] of them (random ones to fill up), and returns
//!   those that match.
//!
//! What the servers learn: that a lookup happened and how many prefixes it carried (almost
//! always one: the browser asks only after a local prefix match), never which. The HTTP
//! listener and the private lookups are the binary's; this module only reads and writes the
//! messages, so it is tested without a network.

use base64ct::Encoding;
use prost::Message;
use rand::Rng;

use crate::list::{PrefixList, PREFIX_BYTES};
use crate::proto;

/// Most prefixes one `fullHashes:find` may ask about (a URL has at most 30 expressions).
pub const MAX_PREFIXES_PER_REQUEST: usize = 32;
/// Largest request accepted (a browser's are a few hundred bytes).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// How long the browser may cache an answer, positive or negative (seconds).
pub const CACHE_SECONDS: i64 = 300;

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

/// The records to fetch for one `fullHashes:find`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Per prefix asked: the prefix and how many of its slots are real records.
    prefixes: Vec<(Vec<u8>, usize)>,
    /// Record indices to fetch privately: [`PrefixList::max_per_prefix`] per prefix, real
    /// ones first.
    pub indices: Vec<u64>,
    platform_type: i32,
}

/// The proxy's view of one list.
#[derive(Debug, Clone)]
pub struct Proxy {
    prefixes: PrefixList,
    threat_type: i32,
}

impl Proxy {
    /// A proxy for the list whose prefixes are `prefixes`, reported to the browser as
    /// `threat_type` (for example [`proto::MALWARE_THREAT`], Firefox's `goog-malware-proto`).
    pub fn new(prefixes: PrefixList, threat_type: i32) -> Self {
        Self {
            prefixes,
            threat_type,
        }
    }

    /// The prefix list.
    pub fn prefixes(&self) -> &PrefixList {
        &self.prefixes
    }

    /// Answers a `FetchThreatListUpdatesRequest`: every list the browser asks about gets a
    /// response; the one of this proxy's threat type holds its prefixes, others are empty.
    pub fn update(&self, request: &[u8]) -> Result<Vec<u8>, ProxyError> {
        let request = proto::FetchThreatListUpdatesRequest::decode(request)
            .map_err(|e| ProxyError::BadRequest(e.to_string()))?;
        let state = self.prefixes.database_id().to_vec();
        let responses = request
            .list_update_requests
            .iter()
            .map(|list| {
                let ours = list.threat_type == self.threat_type;
                let (prefixes, checksum) = if ours {
                    (self.prefixes.distinct().concat(), self.prefixes.checksum())
                } else {
                    (Vec::new(), pir_keys::sha256(&[]))
                };
                let current = ours && list.state == state;
                let additions = if current || prefixes.is_empty() {
                    Vec::new()
                } else {
                    vec![proto::ThreatEntrySet {
                        compression_type: proto::RAW,
                        raw_hashes: Some(proto::RawHashes {
                            prefix_size: PREFIX_BYTES as i32,
                            raw_hashes: prefixes,
                        }),
                        raw_indices: None,
                    }]
                };
                proto::ListUpdateResponse {
                    threat_type: list.threat_type,
                    threat_entry_type: if list.threat_entry_type == 0 {
                        proto::URL
                    } else {
                        list.threat_entry_type
                    },
                    platform_type: list.platform_type,
                    response_type: if current {
                        proto::PARTIAL_UPDATE
                    } else {
                        proto::FULL_UPDATE
                    },
                    additions,
                    removals: Vec::new(),
                    new_client_state: if ours {
                        state.clone()
                    } else {
                        b"empty".to_vec()
                    },
                    checksum: Some(proto::Checksum {
                        sha256: checksum.to_vec(),
                    }),
                }
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
        let per = self.prefixes.max_per_prefix();
        let records = self.prefixes.records() as u64;
        let mut prefixes = Vec::new();
        let mut indices = Vec::new();
        for entry in &info.threat_entries {
            let hash = &entry.hash;
            if hash.len() < PREFIX_BYTES || hash.len() > 32 {
                return Err(ProxyError::BadRequest(format!(
                    "a hash prefix of {} bytes",
                    hash.len()
                )));
            }
            let real = self.prefixes.records_of(&hash[..PREFIX_BYTES]);
            let count = real.len().min(per);
            indices.extend(real.take(count).map(|i| i as u64));
            indices.extend((count..per).map(|_| rng.random_range(0..records)));
            prefixes.push((hash.clone(), count));
        }
        Ok(Plan {
            prefixes,
            indices,
            platform_type: info
                .platform_types
                .first()
                .copied()
                .unwrap_or(proto::ANY_PLATFORM),
        })
    }

    /// The `FindFullHashesResponse` once `plan.indices` were fetched (`fetched[i]` is record
    /// `plan.indices[i]`).
    pub fn full_hashes(&self, plan: &Plan, fetched: &[[u8; 32]]) -> Vec<u8> {
        let per = self.prefixes.max_per_prefix();
        let duration = || proto::Duration {
            seconds: CACHE_SECONDS,
            nanos: 0,
        };
        let mut matches = Vec::new();
        for (k, (prefix, count)) in plan.prefixes.iter().enumerate() {
            for hash in fetched.iter().skip(k * per).take(*count) {
                if hash.starts_with(prefix) {
                    matches.push(proto::ThreatMatch {
                        threat_type: self.threat_type,
                        platform_type: plan.platform_type,
                        threat_entry_type: proto::URL,
                        threat: Some(proto::ThreatEntry {
                            hash: hash.to_vec(),
                            url: String::new(),
                        }),
                        cache_duration: Some(duration()),
                    });
                }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::list::ListDatabase;
    use rand::SeedableRng;

    fn proxy() -> (Proxy, ListDatabase) {
        let (db, _) =
            ListDatabase::build("t", "evil.example\nbad.example/x.exe\nworse.example\n").unwrap();
        (Proxy::new(db.prefix_list(), proto::MALWARE_THREAT), db)
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
        assert_eq!(list.new_client_state, db.id());
        let again = proto::FetchThreatListUpdatesResponse::decode(
            &proxy.update(&update_request(db.id().to_vec())).unwrap()[..],
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
        assert_eq!(plan.indices.len(), 2);
        let fetched: Vec<[u8; 32]> = plan
            .indices
            .iter()
            .map(|&i| db.hashes()[i as usize])
            .collect();
        let reply =
            proto::FindFullHashesResponse::decode(&proxy.full_hashes(&plan, &fetched)[..]).unwrap();
        assert_eq!(reply.matches.len(), 1);
        assert_eq!(reply.matches[0].threat.as_ref().unwrap().hash, listed);
        assert_eq!(reply.matches[0].threat_type, proto::MALWARE_THREAT);
        assert_eq!(reply.matches[0].platform_type, 2);
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
