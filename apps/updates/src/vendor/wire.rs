//! The vendor service's messages (`POST /pir/v1` on `pir vendor serve`).
//!
//! Each travels in the ordinary envelope under scheme `Control` (they belong to no PIR
//! scheme): a request as kind `Query`, a reply as kind `Answer` (a refused request gets the
//! usual `Error` envelope). The mirror list itself is not a message: it is the vendor's
//! download at `GET /pir/v1/hint`, signed by the vendor key like every list.
//!
//! # Request (`PIRVndrQ`, version 1, all integers little-endian)
//!
//! | field | size | meaning |
//! |---|---|---|
//! | prologue | 8 + 2 | `PIRVndrQ`, u16 version 1 |
//! | kind | u8 | 1 status, 2 registration, 3 evidence |
//! | status | (nothing) | asks the current release id and list version |
//! | registration | u16 + url, 32, 32, u64, 64 | the mirror's public URL, its key, the vendor key it registers with, when it signed, and its Ed25519 signature over `"pir-mirror-registration-v1"` followed by the four fields |
//! | evidence | u32 + bytes | an evidence file (`pir fetch` keeps them), at most [`MAX_EVIDENCE_BYTES`] |
//!
//! # Reply (`PIRVndrA`, version 1)
//!
//! | field | size | meaning |
//! |---|---|---|
//! | prologue | 8 + 2 | `PIRVndrA`, u16 version 1 |
//! | outcome | u8 | see [`Outcome`] |
//! | message | u16 + UTF-8 | why, in words (at most [`MAX_MESSAGE`] bytes) |
//! | release id | 32 | SHA-256 of the current signed manifest |
//! | list version | u64 | the current mirror list's version (0: none published yet) |

use pir_core::codec::Codec;
use pir_core::wire::{Prologue, Reader, Writer};
use pir_core::Error;
use pir_keys::{PublicKey, SecretKey, PUBLIC_KEY_LEN, SIGNATURE_LEN};

use crate::mirrors::{check_mirror_url, MAX_URL_LEN};

/// Prologue of a request to the vendor service.
pub const VENDOR_REQUEST: Prologue = Prologue {
    magic: b"PIRVndrQ",
    version: 1,
};

/// Prologue of the vendor service's reply.
pub const VENDOR_REPLY: Prologue = Prologue {
    magic: b"PIRVndrA",
    version: 1,
};

/// Domain-separation prefix of a registration's signed message.
pub const REGISTRATION_CONTEXT: &[u8] = b"pir-mirror-registration-v1";

/// Largest evidence file the vendor takes: a batch of 64 queries to a release of a few
/// million blocks, with the answers, fits well within it.
pub const MAX_EVIDENCE_BYTES: usize = 64 << 20;

/// Longest reply message.
pub const MAX_MESSAGE: usize = 1024;

/// What a client, a mirror or an operator asks the vendor service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VendorRequest {
    /// The current release id and list version.
    Status,
    /// A mirror asks to be listed.
    Register(SignedRegistration),
    /// A client hands in an evidence file.
    Evidence(Vec<u8>),
}

/// A mirror's registration, before signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// Where clients reach it: `https://host:port`.
    pub url: String,
    /// Its key (TLS and answer signatures).
    pub mirror: PublicKey,
    /// The vendor it registers with (a registration cannot be replayed to another vendor).
    pub vendor: PublicKey,
    /// When it was signed, seconds since 1970 (the vendor refuses old ones).
    pub created_unix: u64,
}

/// A registration signed with the mirror's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRegistration {
    /// What is signed.
    pub registration: Registration,
    /// Ed25519 over [`REGISTRATION_CONTEXT`] and the registration's fields.
    pub signature: [u8; SIGNATURE_LEN],
}

impl Registration {
    fn signed_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(REGISTRATION_CONTEXT.len() + self.url.len() + 82);
        w.bytes(REGISTRATION_CONTEXT);
        self.encode_fields(&mut w);
        w.into_bytes()
    }

    fn encode_fields(&self, w: &mut Writer) {
        w.short_bytes(self.url.as_bytes());
        w.bytes(&self.mirror.0);
        w.bytes(&self.vendor.0);
        w.u64(self.created_unix);
    }

    /// Signs with `key`, which must be the mirror's.
    pub fn sign(self, key: &SecretKey) -> SignedRegistration {
        let signature = key.sign(&self.signed_bytes());
        SignedRegistration {
            registration: self,
            signature,
        }
    }
}

impl SignedRegistration {
    /// Whether the mirror key named inside signed it.
    pub fn verify(&self) -> bool {
        let r = &self.registration;
        r.mirror.verify(&r.signed_bytes(), &self.signature).is_ok()
    }
}

/// The request kinds' bytes.
const STATUS: u8 = 1;
const REGISTER: u8 = 2;
const EVIDENCE: u8 = 3;

impl Codec<'_> for VendorRequest {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        VENDOR_REQUEST.write(w);
        match self {
            VendorRequest::Status => w.u8(STATUS),
            VendorRequest::Register(signed) => {
                w.u8(REGISTER);
                signed.registration.encode_fields(w);
                w.bytes(&signed.signature);
            }
            VendorRequest::Evidence(bytes) => {
                w.u8(EVIDENCE);
                // Bounded by MAX_EVIDENCE_BYTES, far below u32::MAX.
                w.u32(bytes.len() as u32);
                w.bytes(bytes);
            }
        }
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        VENDOR_REQUEST.read(r)?;
        match r.u8()? {
            STATUS => Ok(VendorRequest::Status),
            REGISTER => {
                let url = std::str::from_utf8(r.short_bytes(MAX_URL_LEN)?)
                    .map_err(|_| Error::Malformed("the mirror URL is not UTF-8".into()))?
                    .to_owned();
                check_mirror_url(&url)
                    .map_err(|why| Error::Malformed(format!("mirror URL {url:?}: {why}")))?;
                let mirror = PublicKey(r.array::<PUBLIC_KEY_LEN>()?);
                let vendor = PublicKey(r.array::<PUBLIC_KEY_LEN>()?);
                let created_unix = r.u64()?;
                let signature = r.array::<SIGNATURE_LEN>()?;
                Ok(VendorRequest::Register(SignedRegistration {
                    registration: Registration {
                        url,
                        mirror,
                        vendor,
                        created_unix,
                    },
                    signature,
                }))
            }
            EVIDENCE => {
                let len = r.u32()? as usize;
                if len > MAX_EVIDENCE_BYTES {
                    return Err(Error::Oversized {
                        len,
                        limit: MAX_EVIDENCE_BYTES,
                    });
                }
                Ok(VendorRequest::Evidence(r.take(len)?.to_vec()))
            }
            other => Err(Error::UnknownValue {
                field: "vendor request kind",
                found: u64::from(other),
            }),
        }
    }
}

/// What the vendor service did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// A status reply.
    Status = 0,
    /// The registration is kept, waiting for the operator's approval.
    Pending = 1,
    /// The mirror is approved: it is listed once it passes a probe.
    Admitted = 2,
    /// The registration is refused (the message says why).
    Refused = 3,
    /// The evidence proves the mirror signed a wrong answer: it is dropped from the list.
    Proven = 4,
    /// The evidence proves nothing against the mirror (the message says why).
    NotProven = 5,
}

impl Outcome {
    fn from_byte(byte: u8) -> Result<Self, Error> {
        Ok(match byte {
            0 => Outcome::Status,
            1 => Outcome::Pending,
            2 => Outcome::Admitted,
            3 => Outcome::Refused,
            4 => Outcome::Proven,
            5 => Outcome::NotProven,
            other => {
                return Err(Error::UnknownValue {
                    field: "vendor outcome",
                    found: u64::from(other),
                })
            }
        })
    }
}

/// The vendor service's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorReply {
    /// What was done.
    pub outcome: Outcome,
    /// Why, in words.
    pub message: String,
    /// The current release id.
    pub release_id: [u8; 32],
    /// The current list's version (0 when none is published yet).
    pub list_version: u64,
}

impl Codec<'_> for VendorReply {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        VENDOR_REPLY.write(w);
        w.u8(self.outcome as u8);
        let mut end = self.message.len().min(MAX_MESSAGE);
        while !self.message.is_char_boundary(end) {
            end -= 1;
        }
        w.short_bytes(&self.message.as_bytes()[..end]);
        w.bytes(&self.release_id);
        w.u64(self.list_version);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        VENDOR_REPLY.read(r)?;
        let outcome = Outcome::from_byte(r.u8()?)?;
        let message = std::str::from_utf8(r.short_bytes(MAX_MESSAGE)?)
            .map_err(|_| Error::Malformed("the vendor's message is not UTF-8".into()))?
            .to_owned();
        Ok(VendorReply {
            outcome,
            message,
            release_id: r.array()?,
            list_version: r.u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip_and_a_registration_verifies_only_unchanged() {
        let mirror = SecretKey::generate().unwrap();
        let vendor = SecretKey::generate().unwrap().public();
        let signed = Registration {
            url: "https://127.0.0.1:8443".into(),
            mirror: mirror.public(),
            vendor,
            created_unix: 1_700_000_000,
        }
        .sign(&mirror);
        assert!(signed.verify());
        for request in [
            VendorRequest::Status,
            VendorRequest::Register(signed.clone()),
            VendorRequest::Evidence(vec![1, 2, 3]),
        ] {
            let bytes = request.to_bytes();
            assert_eq!(VendorRequest::from_bytes(&bytes, &()).unwrap(), request);
        }
        let mut moved = signed.clone();
        moved.registration.url = "https://127.0.0.1:9443".into();
        assert!(!moved.verify(), "a changed URL no longer verifies");
        let mut other = signed;
        other.registration.vendor = mirror.public();
        assert!(!other.verify(), "nor one replayed to another vendor");

        let reply = VendorReply {
            outcome: Outcome::Pending,
            message: "waiting".into(),
            release_id: [7; 32],
            list_version: 9,
        };
        assert_eq!(
            VendorReply::from_bytes(&reply.to_bytes(), &()).unwrap(),
            reply
        );
    }

    #[test]
    fn bad_requests_are_refused_without_a_panic() {
        let mut bytes = VendorRequest::Status.to_bytes();
        *bytes.last_mut().unwrap() = 9;
        assert!(matches!(
            VendorRequest::from_bytes(&bytes, &()),
            Err(Error::UnknownValue { .. })
        ));
        let mut huge = VendorRequest::Evidence(Vec::new()).to_bytes();
        let at = huge.len() - 4;
        huge[at..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            VendorRequest::from_bytes(&huge, &()),
            Err(Error::Oversized { .. })
        ));
        let mirror = SecretKey::generate().unwrap();
        let plain = Registration {
            url: "http://127.0.0.1:80".into(),
            mirror: mirror.public(),
            vendor: mirror.public(),
            created_unix: 0,
        }
        .sign(&mirror);
        let bytes = VendorRequest::Register(plain).to_bytes();
        assert!(matches!(
            VendorRequest::from_bytes(&bytes, &()),
            Err(Error::Malformed(_))
        ));
        for cut in 0..bytes.len() {
            assert!(VendorRequest::from_bytes(&bytes[..cut], &()).is_err());
        }
    }
}
