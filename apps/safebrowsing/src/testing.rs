//! Requests as a Safe Browsing v4 client (Firefox on Linux) sends them to its list provider,
//! for the tests of the proxy here and of `pir safebrowsing` (feature `testing`, which only
//! dev-dependencies turn on).

use prost::Message;

use crate::proto;

/// `threatListUpdates:fetch` for `lists` ((threat type, platform type) pairs, URL entries),
/// each from `state` (empty: a full update).
pub fn update_request(lists: &[(i32, i32)], state: &[u8]) -> Vec<u8> {
    proto::FetchThreatListUpdatesRequest {
        client: None,
        list_update_requests: lists
            .iter()
            .map(|&(threat_type, platform_type)| proto::ListUpdateRequest {
                threat_type,
                platform_type,
                threat_entry_type: proto::URL,
                state: state.to_vec(),
            })
            .collect(),
    }
    .encode_to_vec()
}

/// `fullHashes:find` for the full hashes of the malware list (on Linux) that start with one
/// of `prefixes`.
pub fn find_request(prefixes: &[&[u8]]) -> Vec<u8> {
    proto::FindFullHashesRequest {
        client: None,
        client_states: Vec::new(),
        threat_info: Some(proto::ThreatInfo {
            threat_types: vec![proto::MALWARE_THREAT],
            platform_types: vec![2],
            threat_entry_types: vec![proto::URL],
            threat_entries: prefixes
                .iter()
                .map(|prefix| proto::ThreatEntry {
                    hash: prefix.to_vec(),
                    url: String::new(),
                })
                .collect(),
        }),
    }
    .encode_to_vec()
}
