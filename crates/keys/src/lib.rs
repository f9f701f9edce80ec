//! `pir-keys`: who is who. Vendors sign manifests and mirror lists, mirrors sign their answers
//! and terminate TLS with the same Ed25519 key, clients pin that key.
//!
//! Main types: [`SecretKey`] and [`PublicKey`] (Ed25519 via `ring`; we never implement the
//! primitive), [`sha256`], and the [`tls`] module, which builds rustls configurations where the
//! server's TLS 1.3 handshake signature must verify under the public key pinned in the signed
//! mirror list (no certificate authorities involved).
//!
//! Key files are text: a first line naming the format and a second line of hex.
//! What it does not do: no key storage policy beyond file permissions, no key rotation.

pub mod tls;

use std::path::Path;

use pir_fs::PathError;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};

/// Length of an Ed25519 public key.
pub const PUBLIC_KEY_LEN: usize = 32;
/// Length of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;
/// An Ed25519 signature.
pub type Signature = [u8; SIGNATURE_LEN];

const SECRET_HEADER: &str = "pir-ed25519-secret-key-v1";
const PUBLIC_HEADER: &str = "pir-ed25519-public-key-v1";

/// Errors of key handling.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A key file could not be read or written.
    #[error(transparent)]
    Io(#[from] pir_fs::PathError),
    /// A key file or key bytes are not in the expected format.
    #[error("{0}")]
    Format(String),
    /// A signature did not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// Key generation or TLS set-up failed.
    #[error("{0}")]
    Crypto(String),
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// SHA-256 of the concatenation of `parts` (no length prefixes: for standard encodings).
fn sha256_parts_raw(parts: &[&[u8]]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        ctx.update(part);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// SHA-256 over several parts, each prefixed by its length (u64 LE) so that part boundaries
/// are unambiguous; used for domain-separated signed messages.
pub fn sha256_parts(parts: &[&[u8]]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        ctx.update(&(part.len() as u64).to_le_bytes());
        ctx.update(part);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The digest a mirror signs for every answer: SHA-256 over the domain
/// `"pir-answer-v1"`, the release id, the SHA-256 of the whole request envelope and the SHA-256
/// of the answer payload. Anyone holding the release can recompute the correct answer to the
/// request, so a signature on a wrong answer is proof that the mirror cheated.
pub fn answer_statement(release_id: &[u8; 32], request: &[u8], answer_payload: &[u8]) -> [u8; 32] {
    sha256_parts(&[
        b"pir-answer-v1",
        release_id,
        &sha256(request),
        &sha256(answer_payload),
    ])
}

/// An Ed25519 secret key (PKCS#8 v2 document, as `ring` produces it).
pub struct SecretKey {
    pkcs8: Vec<u8>,
    pair: Ed25519KeyPair,
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretKey")
            .field("public", &self.public())
            .finish_non_exhaustive()
    }
}

impl SecretKey {
    /// A fresh key from the operating system's randomness.
    pub fn generate() -> Result<Self, KeyError> {
        let document = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| KeyError::Crypto("could not generate an Ed25519 key".into()))?;
        Self::from_pkcs8(document.as_ref())
    }

    /// Parses a PKCS#8 document.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, KeyError> {
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8)
            .map_err(|e| KeyError::Format(format!("not an Ed25519 PKCS#8 key: {e}")))?;
        Ok(Self {
            pkcs8: pkcs8.to_vec(),
            pair,
        })
    }

    /// The PKCS#8 document (for TLS).
    pub fn pkcs8(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        let mut key = [0u8; PUBLIC_KEY_LEN];
        key.copy_from_slice(self.pair.public_key().as_ref());
        PublicKey(key)
    }

    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> Signature {
        let mut sig = [0u8; SIGNATURE_LEN];
        sig.copy_from_slice(self.pair.sign(message).as_ref());
        sig
    }

    /// The key file text.
    pub fn to_text(&self) -> String {
        format!("{SECRET_HEADER}\n{}\n", hex::encode(&self.pkcs8))
    }

    /// Parses key file text.
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        let body = strip_header(text, SECRET_HEADER, "secret key")?;
        let bytes = hex::decode(body.trim()).map_err(|e| KeyError::Format(e.to_string()))?;
        Self::from_pkcs8(&bytes)
    }

    /// Reads a `.key` file.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        Self::from_text(&read(path)?)
            .map_err(|e| KeyError::Format(format!("{}: {e}", path.display())))
    }

    /// Writes a `.key` file readable only by its owner.
    pub fn save(&self, path: &Path) -> Result<(), KeyError> {
        write_private(path, self.to_text().as_bytes())
    }
}

/// An Ed25519 public key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; PUBLIC_KEY_LEN]);

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

impl PublicKey {
    /// Verifies `signature` over `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), KeyError> {
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(message, signature)
            .map_err(|_| KeyError::BadSignature)
    }

    /// The pin of this key's TLS identity as `curl --pinnedpubkey` takes it:
    /// `sha256//` and the base64 SHA-256 of the certificate's SubjectPublicKeyInfo (RFC 8410:
    /// the Ed25519 algorithm identifier, then the 32 key bytes). With it, tools that do not
    /// know `pir` keys (curl, a Prometheus scraper) reach `/metrics` and `/health` over TLS
    /// pinned to this server.
    pub fn tls_pin(&self) -> String {
        use base64ct::Encoding;
        // SEQUENCE { SEQUENCE { OID 1.3.101.112 (Ed25519) } BIT STRING (0 unused bits) key }.
        const SPKI_PREFIX: [u8; 12] = [
            0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
        ];
        let digest = sha256_parts_raw(&[&SPKI_PREFIX, &self.0]);
        format!("sha256//{}", base64ct::Base64::encode_string(&digest))
    }

    /// A short printable fingerprint (first 8 bytes of the key, hex).
    pub fn fingerprint(&self) -> String {
        hex::encode(&self.0[..8])
    }

    /// The key file text.
    pub fn to_text(&self) -> String {
        format!("{PUBLIC_HEADER}\n{}\n", hex::encode(self.0))
    }

    /// Parses key file text.
    pub fn from_text(text: &str) -> Result<Self, KeyError> {
        let body = strip_header(text, PUBLIC_HEADER, "public key")?;
        let bytes = hex::decode(body.trim()).map_err(|e| KeyError::Format(e.to_string()))?;
        let key: [u8; PUBLIC_KEY_LEN] = bytes
            .try_into()
            .map_err(|_| KeyError::Format("an Ed25519 public key is 32 bytes".into()))?;
        Ok(Self(key))
    }

    /// Reads a `.pub` file.
    pub fn load(path: &Path) -> Result<Self, KeyError> {
        Self::from_text(&read(path)?)
            .map_err(|e| KeyError::Format(format!("{}: {e}", path.display())))
    }

    /// Writes a `.pub` file.
    pub fn save(&self, path: &Path) -> Result<(), KeyError> {
        Ok(pir_fs::write_atomic_bytes(path, self.to_text().as_bytes())
            .map_err(PathError::at(path))?)
    }
}

fn strip_header<'a>(text: &'a str, header: &str, what: &str) -> Result<&'a str, KeyError> {
    let mut lines = text.lines();
    match lines.next() {
        Some(first) if first.trim() == header => {}
        Some(first) if first.starts_with("pir-ed25519-") => {
            return Err(KeyError::Format(format!(
                "this file holds a {}, expected a {what}",
                if first.contains("secret") {
                    "secret key"
                } else {
                    "public key"
                }
            )))
        }
        _ => {
            return Err(KeyError::Format(format!(
                "not a pir {what} file (first line should be {header})"
            )))
        }
    }
    let body = lines
        .next()
        .ok_or_else(|| KeyError::Format(format!("{what} file has no key line")))?;
    if lines.any(|l| !l.trim().is_empty()) {
        return Err(KeyError::Format(format!("{what} file has extra lines")));
    }
    Ok(body.trim())
}

fn read(path: &Path) -> Result<String, KeyError> {
    Ok(std::fs::read_to_string(path).map_err(PathError::at(path))?)
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), KeyError> {
    Ok(pir_fs::write_new_private(path, bytes).map_err(PathError::at(path))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::generate().unwrap();
        let sig = key.sign(b"hello");
        key.public().verify(b"hello", &sig).unwrap();
        assert!(key.public().verify(b"hellp", &sig).is_err());

        let kpath = dir.path().join("v.key");
        let ppath = dir.path().join("v.pub");
        key.save(&kpath).unwrap();
        key.public().save(&ppath).unwrap();
        assert!(key.save(&kpath).is_err(), "never overwrite a secret key");
        let loaded = SecretKey::load(&kpath).unwrap();
        assert_eq!(loaded.public(), key.public());
        assert_eq!(PublicKey::load(&ppath).unwrap(), key.public());
        // swapped files give a clear error
        assert!(SecretKey::load(&ppath)
            .unwrap_err()
            .to_string()
            .contains("holds a public key"));
        assert!(PublicKey::load(&kpath)
            .unwrap_err()
            .to_string()
            .contains("holds a secret key"));
    }

    #[test]
    fn sha256_known_answer() {
        // FIPS 180-2 example "abc".
        assert_eq!(
            hex::encode(sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(sha256_parts(&[b"ab", b"c"]), sha256_parts(&[b"a", b"bc"]));
    }
}
