//! The servers file a client of a breach deployment reads: who the two servers are and the
//! keys their TLS and answers must be signed with.
//!
//! ```text
//! pir-breach-servers-v1
//! https://HOST:PORT HEX-ED25519-KEY      (server 0)
//! https://HOST:PORT HEX-ED25519-KEY      (server 1)
//! ```
//! Blank lines and lines starting with `#` are ignored.

use pir_keys::PublicKey;

use crate::info::SERVERS;
use crate::BreachError;

/// First line of a servers file.
pub const SERVERS_HEADER: &str = "pir-breach-servers-v1";

const WHAT: &str = "servers file";

/// The text of a servers file for `servers` (URL and key, server 0 first).
pub fn encode(servers: &[(String, PublicKey)]) -> Result<String, BreachError> {
    pir_client::servers_file::encode(SERVERS_HEADER, SERVERS, servers).map_err(BreachError::Input)
}

/// Parses a servers file (untrusted text): `(URL, key)` of server 0, then server 1.
pub fn parse(text: &str) -> Result<Vec<(String, PublicKey)>, BreachError> {
    pir_client::servers_file::parse(SERVERS_HEADER, SERVERS, "pir breach servers", text)
        .map_err(|e| BreachError::malformed(WHAT, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_files() {
        let servers = vec![
            ("https://127.0.0.1:1/".to_string(), PublicKey([1; 32])),
            ("https://127.0.0.1:2".to_string(), PublicKey([2; 32])),
        ];
        let text = encode(&servers).unwrap();
        let parsed = parse(&format!("# comment\n{text}\n")).unwrap();
        assert_eq!(parsed[0].0, "https://127.0.0.1:1");
        assert_eq!(parsed[1], servers[1]);
        assert!(encode(&servers[..1]).is_err());
        for bad in [
            String::new(),
            "pir-breach-servers-v0\n".to_string(),
            text.replace("https://127.0.0.1:2", "http://x:2"),
            text.replace(&hex::encode([2u8; 32]), "abcd"),
            format!("{text}https://127.0.0.1:3 {}\n", hex::encode([3u8; 32])),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
    }
}
