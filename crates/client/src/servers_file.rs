//! The servers file of a two-server application (breach checks, Safe Browsing): who the
//! servers are and the keys their TLS and answers must be signed with.
//!
//! ```text
//! HEADER                                 (names the application and version)
//! https://HOST:PORT HEX-ED25519-KEY      (server 0)
//! https://HOST:PORT HEX-ED25519-KEY      (server 1)
//! ```
//! Blank lines and lines starting with `#` are ignored.
//!
//! Also the one server named on a command line, `https://HOST:PORT=SERVER.pub` ([`parse_arg`]).

use pir_keys::{KeyError, PublicKey};

/// Why a `--server URL=SERVER.pub` argument was refused.
#[derive(Debug, thiserror::Error)]
pub enum ServerArgError {
    /// No `=` between the URL and the key file.
    #[error("--server {0}: expected https://HOST:PORT=SERVER.pub (the server's public key file)")]
    Form(String),
    /// The key file cannot be read or is not a public key.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// Parses a `--server https://HOST:PORT=SERVER.pub` argument (the form every client command
/// takes) and loads the public key file: the URL, and the key its TLS and answers must be
/// signed with.
pub fn parse_arg(arg: &str) -> Result<(String, PublicKey), ServerArgError> {
    let (url, key_path) = arg
        .split_once('=')
        .ok_or_else(|| ServerArgError::Form(arg.to_string()))?;
    let key = PublicKey::load(std::path::Path::new(key_path))?;
    Ok((url.to_string(), key))
}

/// The text of a servers file with first line `header` for `servers` (URL and key, server 0
/// first); exactly `count` servers.
pub fn encode(
    header: &str,
    count: usize,
    servers: &[(String, PublicKey)],
) -> Result<String, String> {
    if servers.len() != count {
        return Err(format!(
            "a deployment has {count} servers (server 0 first), {} given",
            servers.len()
        ));
    }
    let mut text = format!("{header}\n");
    for (url, key) in servers {
        crate::transport::authority_of(url).map_err(|e| e.to_string())?;
        text.push_str(&format!(
            "{} {}\n",
            url.trim_end_matches('/'),
            hex::encode(key.0)
        ));
    }
    Ok(text)
}

/// Parses a servers file (untrusted text) whose first line must be `header`: `(URL, key)` of
/// each of the `count` servers, in order. `writer` names the command that writes one.
pub fn parse(
    header: &str,
    count: usize,
    writer: &str,
    text: &str,
) -> Result<Vec<(String, PublicKey)>, String> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    if lines.next() != Some(header) {
        return Err(format!("not a servers file (write one with `{writer}`)"));
    }
    let servers = lines
        .map(|line| {
            let (url, key) = line
                .split_once(' ')
                .ok_or_else(|| format!("bad line {line:?}"))?;
            crate::transport::authority_of(url).map_err(|e| e.to_string())?;
            let bytes = hex::decode(key.trim()).map_err(|e| format!("server key: {e}"))?;
            let key: [u8; 32] = bytes
                .try_into()
                .map_err(|_| "a server key is 32 bytes of hex".to_string())?;
            Ok((url.to_string(), PublicKey(key)))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if servers.len() != count {
        return Err(format!(
            "{} servers listed; a deployment has {count}",
            servers.len()
        ));
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_argument_needs_its_key_file() {
        let refused = parse_arg("https://127.0.0.1:1").unwrap_err();
        assert!(matches!(refused, ServerArgError::Form(_)));
        assert!(refused.to_string().contains("HOST:PORT=SERVER.pub"));
        let missing = parse_arg("https://127.0.0.1:1=/nonexistent/server.pub").unwrap_err();
        assert!(matches!(missing, ServerArgError::Key(_)));
    }
}
