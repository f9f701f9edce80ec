//! TLS with a pre-shared key for the NBD export, as nbdkit and qemu-nbd offer it
//! (`--tls-psk`), so unchanged NBD clients connect: `nbdcopy nbds://HOST:PORT/?tls-psk-file=FILE`
//! (libnbd) and qemu's `tls-creds-psk` object.
//!
//! Keys come from a file in GnuTLS `psktool`'s format: one `username:hexkey` per line. The
//! server accepts TLS 1.3 with an external PSK (SHA-256, as GnuTLS offers it) and TLS 1.2
//! (EC)DHE-PSK suites with AEAD; never plain PSK without forward secrecy, never a certificate.
//! A client that does not know a key of the file fails the handshake, before any option about
//! the export is answered.
//!
//! OpenSSL does the TLS (rustls has no external-PSK support); this module only configures it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use openssl::ssl::{SslContext, SslMethod, SslVersion};

/// Longest identity accepted (RFC 4279 section 5.3 allows 2^16-1; psktool names are short).
const MAX_IDENTITY: usize = 128;
/// Key lengths accepted, in bytes: at least 128 bits, at most OpenSSL's buffer.
const KEY_BYTES: std::ops::RangeInclusive<usize> = 16..=64;
/// TLS 1.2 suites: ephemeral (EC)DH with the PSK and an AEAD, which GnuTLS clients offer.
const TLS12_SUITES: &str = "ECDHE-PSK-CHACHA20-POLY1305:DHE-PSK-AES256-GCM-SHA384:\
DHE-PSK-AES128-GCM-SHA256:DHE-PSK-CHACHA20-POLY1305";
/// TLS 1.3 suites. An external PSK without a session is offered with SHA-256, so
/// `TLS_AES_128_GCM_SHA256` must stay on the list.
const TLS13_SUITES: &str = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";

/// Why a key file or the TLS set-up was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PskError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A line is not `username:hexkey`.
    #[error("{path} line {line}: {why} (psktool's format is username:hexkey, one per line)")]
    Format {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong (never the key).
        why: String,
    },
    /// OpenSSL refused the configuration.
    #[error("TLS set-up: {0}")]
    Tls(#[from] openssl::error::ErrorStack),
}

/// The keys of a psktool file, by username.
pub struct PskKeys {
    keys: HashMap<String, Vec<u8>>,
}

impl std::fmt::Debug for PskKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the keys are secrets.
        let mut names: Vec<&String> = self.keys.keys().collect();
        names.sort();
        f.debug_struct("PskKeys").field("users", &names).finish()
    }
}

impl PskKeys {
    /// Reads a psktool file.
    pub fn load(path: &Path) -> Result<PskKeys, PskError> {
        let text = std::fs::read_to_string(path).map_err(|source| PskError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|(line, why)| PskError::Format {
            path: path.display().to_string(),
            line,
            why,
        })
    }

    /// Parses psktool's `username:hexkey` lines; errors carry the line number.
    pub fn parse(text: &str) -> Result<PskKeys, (usize, String)> {
        let mut keys = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (user, hex_key) = line
                .rsplit_once(':')
                .ok_or((i + 1, "no ':' between the username and the key".to_string()))?;
            if user.is_empty() || user.len() > MAX_IDENTITY {
                return Err((i + 1, format!("a username of 1 to {MAX_IDENTITY} bytes")));
            }
            let key = hex::decode(hex_key).map_err(|_| (i + 1, "the key is not hex".into()))?;
            if !KEY_BYTES.contains(&key.len()) {
                return Err((
                    i + 1,
                    format!(
                        "a key of {} bytes (16 to 64 needed; psktool -s 32 makes one)",
                        key.len()
                    ),
                ));
            }
            if keys.insert(user.to_string(), key).is_some() {
                return Err((i + 1, format!("username {user} appears twice")));
            }
        }
        if keys.is_empty() {
            return Err((0, "no key".into()));
        }
        Ok(PskKeys { keys })
    }

    /// The key of `identity`, if the file has it.
    fn key(&self, identity: &[u8]) -> Option<&[u8]> {
        let name = std::str::from_utf8(identity).ok()?;
        self.keys.get(name).map(Vec::as_slice)
    }
}

/// An OpenSSL server context that completes a handshake only with a client holding one of
/// `keys`.
pub fn server_context(keys: Arc<PskKeys>) -> Result<SslContext, PskError> {
    let mut builder = SslContext::builder(SslMethod::tls_server())?;
    builder.set_min_proto_version(Some(SslVersion::TLS1_2))?;
    builder.set_cipher_list(TLS12_SUITES)?;
    builder.set_ciphersuites(TLS13_SUITES)?;
    // No session tickets: every connection proves the key again.
    builder.set_options(openssl::ssl::SslOptions::NO_TICKET);
    builder.set_psk_server_callback(move |_ssl, identity, out| {
        let Some(key) = identity.and_then(|id| keys.key(id)) else {
            // Unknown identity: 0 bytes of key fails the handshake.
            return Ok(0);
        };
        if key.len() > out.len() {
            return Ok(0);
        }
        out[..key.len()].copy_from_slice(key);
        Ok(key.len())
    });
    Ok(builder.build())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn psktool_lines_parse_and_bad_ones_are_refused() {
        let keys = PskKeys::parse(&format!(
            "alice:{}\n\n# note\nbob:{}\n",
            "ab".repeat(32),
            "01".repeat(16)
        ))
        .unwrap();
        assert_eq!(keys.key(b"alice").unwrap(), &[0xab; 32][..]);
        assert_eq!(keys.key(b"bob").unwrap().len(), 16);
        assert!(keys.key(b"carol").is_none());
        assert!(keys.key(&[0xff]).is_none());
        for (bad, line) in [
            ("alice", 1),
            (&*format!("alice:{}", "zz".repeat(32)), 1),
            ("alice:abcd", 1),
            (&*format!(":{}", "ab".repeat(32)), 1),
            (&*format!("a:{0}\na:{0}", "ab".repeat(32)), 2),
            ("", 0),
        ] {
            assert_eq!(PskKeys::parse(bad).err().unwrap().0, line, "{bad}");
        }
        // The Debug form never shows a key.
        assert!(!format!("{keys:?}").contains("abab"));
        server_context(Arc::new(keys)).unwrap();
    }
}
