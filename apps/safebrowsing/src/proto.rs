//! The messages of the Safe Browsing v4 API that a browser exchanges with its list provider,
//! as Protocol Buffers (`safebrowsing.proto` of the v4 API; field numbers from its published
//! definition). Only what the proxy reads or writes is declared; prost skips unknown fields, so
//! a browser that sends more still decodes.
//!
//! Enumerations are plain `i32` fields, with the values used here as constants.

/// `ThreatType.MALWARE_THREAT`: what Firefox's `goog-malware-proto` table holds.
pub const MALWARE_THREAT: i32 = 1;
/// `ThreatType.SOCIAL_ENGINEERING_PUBLIC` (`googpub-phish-proto`).
pub const SOCIAL_ENGINEERING_PUBLIC: i32 = 2;
/// `ThreatType.UNWANTED_SOFTWARE` (`goog-unwanted-proto`).
pub const UNWANTED_SOFTWARE: i32 = 3;
/// `ThreatType.POTENTIALLY_HARMFUL_APPLICATION` (`goog-harmful-proto`: named by Firefox's
/// `google4` provider but used by no table, so never fetched).
pub const POTENTIALLY_HARMFUL_APPLICATION: i32 = 4;
/// `ThreatType.SOCIAL_ENGINEERING` (`goog-phish-proto`).
pub const SOCIAL_ENGINEERING: i32 = 5;
/// `ThreatType.MALICIOUS_BINARY` (`goog-badbinurl-proto`: download protection).
pub const MALICIOUS_BINARY: i32 = 7;
/// `ThreatType.CSD_DOWNLOAD_WHITELIST` (`goog-downloadwhite-proto`: trusted downloads).
pub const CSD_DOWNLOAD_WHITELIST: i32 = 9;
/// `ThreatEntryType.URL`.
pub const URL: i32 = 1;
/// `PlatformType.ANY_PLATFORM`.
pub const ANY_PLATFORM: i32 = 6;
/// `CompressionType.RAW`.
pub const RAW: i32 = 1;
/// `ListUpdateResponse.ResponseType.PARTIAL_UPDATE`.
pub const PARTIAL_UPDATE: i32 = 1;
/// `ListUpdateResponse.ResponseType.FULL_UPDATE`.
pub const FULL_UPDATE: i32 = 2;

/// `ClientInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClientInfo {
    /// `client_id = 1`.
    #[prost(string, tag = "1")]
    pub client_id: String,
    /// `client_version = 2`.
    #[prost(string, tag = "2")]
    pub client_version: String,
}

/// `google.protobuf.Duration`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Duration {
    /// `seconds = 1`.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// `nanos = 2`.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `FetchThreatListUpdatesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FetchThreatListUpdatesRequest {
    /// `client = 1`.
    #[prost(message, optional, tag = "1")]
    pub client: Option<ClientInfo>,
    /// `list_update_requests = 3`.
    #[prost(message, repeated, tag = "3")]
    pub list_update_requests: Vec<ListUpdateRequest>,
}

/// `FetchThreatListUpdatesRequest.ListUpdateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListUpdateRequest {
    /// `threat_type = 1`.
    #[prost(int32, tag = "1")]
    pub threat_type: i32,
    /// `platform_type = 2`.
    #[prost(int32, tag = "2")]
    pub platform_type: i32,
    /// `threat_entry_type = 5`.
    #[prost(int32, tag = "5")]
    pub threat_entry_type: i32,
    /// `state = 3`: the `new_client_state` of the client's last update (empty at first).
    #[prost(bytes = "vec", tag = "3")]
    pub state: Vec<u8>,
}

/// `FetchThreatListUpdatesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FetchThreatListUpdatesResponse {
    /// `list_update_responses = 1`.
    #[prost(message, repeated, tag = "1")]
    pub list_update_responses: Vec<ListUpdateResponse>,
    /// `minimum_wait_duration = 2`.
    #[prost(message, optional, tag = "2")]
    pub minimum_wait_duration: Option<Duration>,
}

/// `FetchThreatListUpdatesResponse.ListUpdateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListUpdateResponse {
    /// `threat_type = 1`.
    #[prost(int32, tag = "1")]
    pub threat_type: i32,
    /// `threat_entry_type = 2`.
    #[prost(int32, tag = "2")]
    pub threat_entry_type: i32,
    /// `platform_type = 3`.
    #[prost(int32, tag = "3")]
    pub platform_type: i32,
    /// `response_type = 4`: [`PARTIAL_UPDATE`] or [`FULL_UPDATE`].
    #[prost(int32, tag = "4")]
    pub response_type: i32,
    /// `additions = 5`.
    #[prost(message, repeated, tag = "5")]
    pub additions: Vec<ThreatEntrySet>,
    /// `removals = 6`.
    #[prost(message, repeated, tag = "6")]
    pub removals: Vec<ThreatEntrySet>,
    /// `new_client_state = 7`.
    #[prost(bytes = "vec", tag = "7")]
    pub new_client_state: Vec<u8>,
    /// `checksum = 8`.
    #[prost(message, optional, tag = "8")]
    pub checksum: Option<Checksum>,
}

/// `ThreatEntrySet`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreatEntrySet {
    /// `compression_type = 1`.
    #[prost(int32, tag = "1")]
    pub compression_type: i32,
    /// `raw_hashes = 2`.
    #[prost(message, optional, tag = "2")]
    pub raw_hashes: Option<RawHashes>,
    /// `raw_indices = 3`.
    #[prost(message, optional, tag = "3")]
    pub raw_indices: Option<RawIndices>,
}

/// `RawHashes`: prefixes of one size, concatenated in sorted order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawHashes {
    /// `prefix_size = 1`.
    #[prost(int32, tag = "1")]
    pub prefix_size: i32,
    /// `raw_hashes = 2`.
    #[prost(bytes = "vec", tag = "2")]
    pub raw_hashes: Vec<u8>,
}

/// `RawIndices`: positions in the client's sorted list to remove.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawIndices {
    /// `indices = 1`.
    #[prost(int32, repeated, tag = "1")]
    pub indices: Vec<i32>,
}

/// `Checksum`: SHA-256 of the client's whole sorted prefix list after the update.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Checksum {
    /// `sha256 = 1`.
    #[prost(bytes = "vec", tag = "1")]
    pub sha256: Vec<u8>,
}

/// `FindFullHashesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FindFullHashesRequest {
    /// `client = 1`.
    #[prost(message, optional, tag = "1")]
    pub client: Option<ClientInfo>,
    /// `client_states = 2`.
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub client_states: Vec<Vec<u8>>,
    /// `threat_info = 3`.
    #[prost(message, optional, tag = "3")]
    pub threat_info: Option<ThreatInfo>,
}

/// `ThreatInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreatInfo {
    /// `threat_types = 1`.
    #[prost(int32, repeated, tag = "1")]
    pub threat_types: Vec<i32>,
    /// `platform_types = 2`.
    #[prost(int32, repeated, tag = "2")]
    pub platform_types: Vec<i32>,
    /// `threat_entry_types = 4`.
    #[prost(int32, repeated, tag = "4")]
    pub threat_entry_types: Vec<i32>,
    /// `threat_entries = 3`.
    #[prost(message, repeated, tag = "3")]
    pub threat_entries: Vec<ThreatEntry>,
}

/// `ThreatEntry`: a hash (prefix or full) or a URL.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreatEntry {
    /// `hash = 1`.
    #[prost(bytes = "vec", tag = "1")]
    pub hash: Vec<u8>,
    /// `url = 2`.
    #[prost(string, tag = "2")]
    pub url: String,
}

/// `FindFullHashesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FindFullHashesResponse {
    /// `matches = 1`.
    #[prost(message, repeated, tag = "1")]
    pub matches: Vec<ThreatMatch>,
    /// `minimum_wait_duration = 2`.
    #[prost(message, optional, tag = "2")]
    pub minimum_wait_duration: Option<Duration>,
    /// `negative_cache_duration = 3`.
    #[prost(message, optional, tag = "3")]
    pub negative_cache_duration: Option<Duration>,
}

/// `ThreatMatch`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreatMatch {
    /// `threat_type = 1`.
    #[prost(int32, tag = "1")]
    pub threat_type: i32,
    /// `platform_type = 2`.
    #[prost(int32, tag = "2")]
    pub platform_type: i32,
    /// `threat_entry_type = 6`.
    #[prost(int32, tag = "6")]
    pub threat_entry_type: i32,
    /// `threat = 3`.
    #[prost(message, optional, tag = "3")]
    pub threat: Option<ThreatEntry>,
    /// `cache_duration = 5`.
    #[prost(message, optional, tag = "5")]
    pub cache_duration: Option<Duration>,
}
