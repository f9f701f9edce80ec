//! The proxy's unit tests: v4 requests and answers over a small list.

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
        proto::FetchThreatListUpdatesResponse::decode(&proxy.update(&once).unwrap()[..]).unwrap();
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
    let reply = proto::FetchThreatListUpdatesResponse::decode(&proxy.update(&request).unwrap()[..])
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
            proto::FindFullHashesResponse::decode(&proxy.full_hashes(&plan, &fetched)[..]).unwrap();
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
