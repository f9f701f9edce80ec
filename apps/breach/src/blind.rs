//! Blinded matching on ristretto255 (Günther 2019, sections 4.2 and 4.3: the PSI half of the
//! credential check).
//!
//! ```text
//! P(h)   = RistrettoPoint::hash_from_bytes::<Sha512>(HASH_TO_POINT_DST | h)
//! tag(Q) = SHA-256(TAG_DST | encode(Q))[0..16]                         the stored value
//!
//! build:   every credential h  -> tag(k·P(h)) in bucket  top_bits(h, prefix_bits)
//! client:  a <- random nonzero scalar;   request  = encode(a·P(h))      (32 bytes)
//! server:  check request;                response = encode(k·(a·P(h)))  (32 bytes)
//! client:  k·P(h) = a^-1 · response;     found    = tag(k·P(h)) is in the retrieved bucket
//! ```
//!
//! The server sees only `a·P(h)`, a uniformly random point independent of `h`; the client
//! learns `k·P(h)` for its own `h` only, so the bucket tells it nothing about other
//! credentials (without `k` a tag cannot be recomputed from a guess). The bucket index comes
//! from `h`, not from the blinded point, and is hidden by PIR.
//!
//! Tags are a hash of the point's encoding rather than a prefix of it, because ristretto255
//! encodings are not uniform (the encoded field element is always "non-negative": bit 0 of the
//! first byte is zero) and a sorted bucket compresses best with uniform values. A tag keeps
//! [`TAG_BITS`] = 128 bits: a check that should miss matches one of the `m` tags of its
//! bucket with probability at most `m / 2^128`.
//!
//! The blinding key `k` is a scalar the database builder draws; it is written to its own key
//! file (see [`BlindingKey::to_text`]) that the operator gives to the server(s) that answer
//! blinded requests. The database file holds only tags, and [`BlindingKey::key_id`] in its
//! header names the key it needs.

use std::path::Path;

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use rand::{CryptoRng, RngCore};
use sha2::{Digest, Sha256, Sha512};

use crate::bits::{Value, VALUE_BYTES};
use crate::bucket::Bucket;
use crate::credential::CREDENTIAL_HASH_BYTES;
use crate::info::TAG_BLIND;
use crate::BreachError;
use pir_core::codec::{Reader, Writer};
use pir_core::{Codec, Error};
use pir_fs::PathError;

/// Bytes of an encoded ristretto255 point: a blinded request or response.
pub const POINT_BYTES: usize = 32;

/// Bytes of a stored tag.
pub const TAG_BYTES: usize = 16;

/// Bits of a stored tag (the value width of credential databases).
pub const TAG_BITS: u32 = 8 * TAG_BYTES as u32;

/// Bytes of a key id.
pub const KEY_ID_BYTES: usize = 16;

/// Domain separator of hash-to-point.
pub const HASH_TO_POINT_DST: &[u8] = b"pir-breach/v1 hash to ristretto255";

/// Domain separator of tags.
pub const TAG_DST: &[u8] = b"pir-breach/v1 blinded tag";

/// Domain separator of key ids.
pub const KEY_ID_DST: &[u8] = b"pir-breach/v1 key id";

/// First line of a blinding key file.
pub const KEY_FILE_HEADER: &str = "pir-breach-blinding-key-v1";

/// `P(h)`: the credential hash mapped to ristretto255 (Elligator, via SHA-512).
pub fn hash_to_point(h: &[u8; CREDENTIAL_HASH_BYTES]) -> RistrettoPoint {
    let mut input = Vec::with_capacity(HASH_TO_POINT_DST.len() + h.len());
    input.extend_from_slice(HASH_TO_POINT_DST);
    input.extend_from_slice(h);
    RistrettoPoint::hash_from_bytes::<Sha512>(&input)
}

/// `tag(Q)`: the value stored for a blinded point, as a left-aligned bucket [`Value`].
pub fn tag_of(point: &RistrettoPoint) -> Value {
    let digest = Sha256::new()
        .chain_update(TAG_DST)
        .chain_update(point.compress().as_bytes())
        .finalize();
    let mut value = [0u8; VALUE_BYTES];
    value[..TAG_BYTES].copy_from_slice(&digest[..TAG_BYTES]);
    value
}

/// A uniformly random nonzero scalar from 64 random bytes (reduced mod the group order, so
/// the bias is below 2^-256).
fn random_scalar<R: RngCore + CryptoRng + ?Sized>(rng: &mut R) -> Scalar {
    loop {
        let mut wide = [0u8; 64];
        rng.fill_bytes(&mut wide);
        let s = Scalar::from_bytes_mod_order_wide(&wide);
        if s != Scalar::ZERO {
            return s;
        }
    }
}

/// A ristretto255 point on the wire: 32 bytes, a canonical encoding, not the identity
/// (blinding the identity gives the identity and would reveal nothing useful, but accepting it
/// lets a peer probe for a zero key). The blinded response is one; a request is one behind
/// its tag ([`BlindRequest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WirePoint(pub RistrettoPoint);

impl Codec<'_> for WirePoint {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.bytes(&self.0.compress().to_bytes());
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        let point = CompressedRistretto(r.array()?)
            .decompress()
            .ok_or_else(|| {
                Error::Malformed("not a canonical ristretto255 point encoding".into())
            })?;
        if point.is_identity() {
            return Err(Error::Malformed("the identity point is not allowed".into()));
        }
        Ok(Self(point))
    }
}

/// A blinded request: `0x10 | point 32` ([`TAG_BLIND`], then a [`WirePoint`]), one query of
/// the signed batch, sent to the server that holds the blinding key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlindRequest(pub WirePoint);

impl Codec<'_> for BlindRequest {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.u8(TAG_BLIND);
        self.0.encode(w);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        let tag = r.u8()?;
        if tag != TAG_BLIND {
            return Err(Error::UnknownValue {
                field: "blinded request tag",
                found: u64::from(tag),
            });
        }
        WirePoint::decode(r, &()).map(Self)
    }
}

/// Decodes a point from untrusted bytes: exactly [`POINT_BYTES`], then a [`WirePoint`].
fn decode_point(bytes: &[u8], what: &'static str) -> Result<RistrettoPoint, BreachError> {
    if bytes.len() != POINT_BYTES {
        return Err(BreachError::malformed(
            what,
            format!("{} bytes, expected {POINT_BYTES}", bytes.len()),
        ));
    }
    WirePoint::from_bytes(bytes, &())
        .map(|point| point.0)
        .map_err(|error| BreachError::malformed(what, error.to_string()))
}

/// The server's secret blinding key `k`, a nonzero scalar.
#[derive(Clone, PartialEq, Eq)]
pub struct BlindingKey {
    scalar: Scalar,
}

impl std::fmt::Debug for BlindingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlindingKey(id {})", hex::encode(self.key_id()))
    }
}

impl BlindingKey {
    /// A fresh random key.
    pub fn generate<R: RngCore + CryptoRng + ?Sized>(rng: &mut R) -> Self {
        Self {
            scalar: random_scalar(rng),
        }
    }

    /// A key from its 32-byte canonical little-endian scalar encoding (nonzero).
    pub fn from_bytes(bytes: [u8; 32]) -> Result<Self, BreachError> {
        let scalar = Option::<Scalar>::from(Scalar::from_canonical_bytes(bytes))
            .ok_or_else(|| BreachError::malformed("blinding key", "not a canonical scalar"))?;
        if scalar == Scalar::ZERO {
            return Err(BreachError::malformed("blinding key", "the key is zero"));
        }
        Ok(Self { scalar })
    }

    /// The 32-byte scalar encoding.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.scalar.to_bytes()
    }

    /// A public name for the key: `SHA-256(KEY_ID_DST | encode(k·B))[0..16]`, `B` the
    /// ristretto255 base point. Database headers carry it so a server can tell that a key
    /// file belongs to a database; it reveals nothing about `k`.
    pub fn key_id(&self) -> [u8; KEY_ID_BYTES] {
        let public = RistrettoPoint::mul_base(&self.scalar).compress();
        let digest = Sha256::new()
            .chain_update(KEY_ID_DST)
            .chain_update(public.as_bytes())
            .finalize();
        let mut id = [0u8; KEY_ID_BYTES];
        id.copy_from_slice(&digest[..KEY_ID_BYTES]);
        id
    }

    /// The stored tag of credential hash `h`: `tag(k·P(h))`.
    pub fn tag_for(&self, h: &[u8; CREDENTIAL_HASH_BYTES]) -> Value {
        tag_of(&(self.scalar * hash_to_point(h)))
    }

    /// Key file text: the line [`KEY_FILE_HEADER`], then the scalar in hex.
    pub fn to_text(&self) -> String {
        format!("{KEY_FILE_HEADER}\n{}\n", hex::encode(self.to_bytes()))
    }

    /// Parses key file text.
    pub fn from_text(text: &str) -> Result<Self, BreachError> {
        const WHAT: &str = "blinding key file";
        let mut lines = text.lines();
        if lines.next().map(str::trim) != Some(KEY_FILE_HEADER) {
            return Err(BreachError::malformed(
                WHAT,
                format!("the first line should be {KEY_FILE_HEADER}"),
            ));
        }
        let body = lines
            .next()
            .ok_or_else(|| BreachError::malformed(WHAT, "no key line"))?;
        if lines.any(|l| !l.trim().is_empty()) {
            return Err(BreachError::malformed(WHAT, "extra lines after the key"));
        }
        let bytes =
            hex::decode(body.trim()).map_err(|e| BreachError::malformed(WHAT, e.to_string()))?;
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| BreachError::malformed(WHAT, "the key is not 32 bytes"))?;
        Self::from_bytes(bytes)
    }

    /// Reads a key file.
    pub fn load(path: &Path) -> Result<Self, BreachError> {
        let text = std::fs::read_to_string(path).map_err(PathError::at(path))?;
        Self::from_text(&text).map_err(|e| match e {
            BreachError::Malformed { what, message } => BreachError::Malformed {
                what,
                message: format!("{}: {message}", path.display()),
            },
            other => other,
        })
    }

    /// Writes a new key file readable only by its owner; refuses to overwrite a file.
    pub fn save(&self, path: &Path) -> Result<(), BreachError> {
        use std::io::Write;
        let io = PathError::at(path);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(path).map_err(&io)?;
        file.write_all(self.to_text().as_bytes()).map_err(&io)?;
        Ok(file.sync_all().map_err(&io)?)
    }
}

/// Server side: blinds a client's request with the key. Checks that the request is exactly
/// one canonical, non-identity ristretto255 encoding; returns `encode(k·Q)`.
pub fn blind_query(key: &BlindingKey, request: &[u8]) -> Result<[u8; POINT_BYTES], BreachError> {
    let point = decode_point(request, "blinded request")?;
    Ok(blind_point(key, &WirePoint(point)))
}

/// Server side on a decoded request: `encode(k·Q)`.
pub fn blind_point(key: &BlindingKey, point: &WirePoint) -> [u8; POINT_BYTES] {
    (key.scalar * point.0).compress().to_bytes()
}

/// Client side of one blinded check; holds the one-time blinding scalar `a`.
pub struct BlindedCheck {
    blind: Scalar,
}

impl std::fmt::Debug for BlindedCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlindedCheck(..)")
    }
}

impl BlindedCheck {
    /// Starts a check of credential hash `h` with a fresh random `a`: returns the request
    /// bytes `encode(a·P(h))` and the state that finishes the check.
    pub fn new<R: RngCore + CryptoRng + ?Sized>(
        h: &[u8; CREDENTIAL_HASH_BYTES],
        rng: &mut R,
    ) -> ([u8; POINT_BYTES], Self) {
        let blind = random_scalar(rng);
        let request = (blind * hash_to_point(h)).compress().to_bytes();
        (request, Self { blind })
    }

    /// Unblinds the server's response and looks the tag up in the retrieved (decoded)
    /// bucket. `Ok(true)` when the credential is in the corpus (or, with probability at most
    /// `m / 2^128`, collides with one of the bucket's `m` tags). A malformed response is an
    /// error, never a verdict.
    pub fn finish(self, response: &[u8], bucket: &Bucket) -> Result<bool, BreachError> {
        let point = decode_point(response, "blinded response")?;
        let unblinded = self.blind.invert() * point;
        Ok(bucket.contains(&tag_of(&unblinded)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::{BucketCodec, Entry};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn bucket_of(tags: &[Value]) -> Bucket {
        let codec = BucketCodec::new(TAG_BITS, false).unwrap();
        let mut entries: Vec<Entry> = tags
            .iter()
            .map(|&value| Entry { value, count: 1 })
            .collect();
        entries.sort();
        let mut block = codec.encode(&entries).unwrap();
        block.resize(block.len() + 64, 0);
        codec.decode(&block).unwrap()
    }

    #[test]
    fn blinded_check_finds_members_only() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let key = BlindingKey::generate(&mut rng);
        let member = [7u8; 32];
        let other = [8u8; 32];
        let bucket = bucket_of(&[key.tag_for(&member), key.tag_for(&[9u8; 32])]);
        for (h, expected) in [(member, true), (other, false)] {
            let (request, check) = BlindedCheck::new(&h, &mut rng);
            let response = blind_query(&key, &request).unwrap();
            assert_eq!(check.finish(&response, &bucket).unwrap(), expected);
        }
        // A different key's answer does not match.
        let wrong = BlindingKey::generate(&mut rng);
        let (request, check) = BlindedCheck::new(&member, &mut rng);
        assert!(!check
            .finish(&blind_query(&wrong, &request).unwrap(), &bucket)
            .unwrap());
    }

    #[test]
    fn requests_are_fresh_and_unlinkable() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let (a, _) = BlindedCheck::new(&[1u8; 32], &mut rng);
        let (b, _) = BlindedCheck::new(&[1u8; 32], &mut rng);
        assert_ne!(
            a, b,
            "the same credential must give a different request each time"
        );
        assert_ne!(a, hash_to_point(&[1u8; 32]).compress().to_bytes());
    }

    #[test]
    fn fail_vectors_are_refused() {
        use pir_core::codec::testing::{check_format, FailVector, Patch};
        let dir = env!("CARGO_MANIFEST_DIR");
        // The same two bad points after `prefix` (the tag, or nothing).
        let bad_points = |prefix: &[u8]| {
            let point = |byte: u8| [prefix, &[byte; POINT_BYTES]].concat();
            vec![
                FailVector::new("identity", "Malformed", "the identity", point(0)),
                FailVector::new("non_canonical", "Malformed", "all 0xff", point(0xff)),
            ]
        };
        let point = WirePoint(hash_to_point(&[1u8; 32]));
        let good = BlindRequest(point).to_bytes();
        let wrong_tag: &[Patch<'_>] = &[("wrong_tag", "UnknownValue", "QDP tag 3", 0, 1, 3)];
        let extra = bad_points(&[TAG_BLIND]);
        check_format::<BlindRequest>(dir, "breach_blind_request", &good, &(), wrong_tag, extra);
        let extra = bad_points(&[]);
        check_format::<WirePoint>(
            dir,
            "breach_blind_response",
            &point.to_bytes(),
            &(),
            &[],
            extra,
        );
    }

    #[test]
    fn malformed_points_are_rejected() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let key = BlindingKey::generate(&mut rng);
        let cases: [(&[u8], &str); 5] = [
            (&[], "0 bytes"),
            (&[1u8; 33], "33 bytes"),
            (&[0u8; 32], "identity"),
            (&[0xffu8; 32], "canonical"),
            // 1 is odd, so it is a "negative" field element: never a valid encoding.
            (
                &{
                    let mut b = [0u8; 32];
                    b[0] = 1;
                    b
                },
                "canonical",
            ),
        ];
        for (bytes, why) in cases {
            let err = blind_query(&key, bytes).unwrap_err();
            assert!(err.is_peer_error());
            assert!(err.to_string().contains(why), "{err}");
            let (_, check) = BlindedCheck::new(&[1u8; 32], &mut rng);
            let err = check
                .finish(bytes, &Bucket::default())
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("malformed blinded response"), "{err}");
        }
    }

    #[test]
    fn key_files() {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let key = BlindingKey::generate(&mut rng);
        let text = key.to_text();
        assert!(text.starts_with("pir-breach-blinding-key-v1\n"));
        assert_eq!(BlindingKey::from_text(&text).unwrap(), key);
        assert!(!format!("{key:?}").contains(&hex::encode(key.to_bytes())));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.key");
        key.save(&path).unwrap();
        assert_eq!(BlindingKey::load(&path).unwrap().key_id(), key.key_id());
        assert!(key.save(&path).is_err(), "never overwrite a key");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        for bad in [
            "pir-ed25519-secret-key-v1\n00\n".to_string(),
            format!("{KEY_FILE_HEADER}\n"),
            format!("{KEY_FILE_HEADER}\nabcd\n"),
            format!("{KEY_FILE_HEADER}\n{}\n", "00".repeat(32)),
            format!("{KEY_FILE_HEADER}\n{}\n", "ff".repeat(32)),
            format!("{}x\n", key.to_text()),
        ] {
            assert!(BlindingKey::from_text(&bad).is_err(), "{bad}");
        }
    }
}
