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
    if servers.len() != SERVERS {
        return Err(BreachError::Input(format!(
            "a deployment has {SERVERS} servers (server 0 first), {} given",
            servers.len()
        )));
    }
    let mut text = format!("{SERVERS_HEADER}\n");
    for (url, key) in servers {
        pir_client::transport::authority_of(url).map_err(|e| BreachError::Input(e.to_string()))?;
        text.push_str(&format!(
            "{} {}\n",
            url.trim_end_matches('/'),
            hex::encode(key.0)
        ));
    }
    Ok(text)
}

/// Parses a servers file (untrusted text): `(URL, key)` of server 0, then server 1.
pub fn parse(text: &str) -> Result<Vec<(String, PublicKey)>, BreachError> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    if lines.next() != Some(SERVERS_HEADER) {
        return Err(BreachError::malformed(
            WHAT,
            "not a servers file (write one with `pir breach servers`)",
        ));
    }
    let servers = lines
        .map(|line| {
            let (url, key) = line
                .split_once(' ')
                .ok_or_else(|| BreachError::malformed(WHAT, format!("bad line {line:?}")))?;
            pir_client::transport::authority_of(url)
                .map_err(|e| BreachError::malformed(WHAT, e.to_string()))?;
            let bytes = hex::decode(key.trim())
                .map_err(|e| BreachError::malformed(WHAT, format!("server key: {e}")))?;
            let key: [u8; 32] = bytes
                .try_into()
                .map_err(|_| BreachError::malformed(WHAT, "a server key is 32 bytes of hex"))?;
            Ok((url.to_string(), PublicKey(key)))
        })
        .collect::<Result<Vec<_>, BreachError>>()?;
    if servers.len() != SERVERS {
        return Err(BreachError::malformed(
            WHAT,
            format!(
                "{} servers listed; a deployment has {SERVERS}",
                servers.len()
            ),
        ));
    }
    Ok(servers)
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
