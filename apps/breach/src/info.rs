//! The info body of a `pir breach` server: what it tells clients about itself (database shape,
//! its position, RAID-PIR parameters, whether it blinds, the application's database header).
//! One codec for the server that writes it and the client that reads it (untrusted bytes).

use pir_core::wire::{Envelope, MessageKind, Prologue, Reader, Writer};
use pir_core::{Codec, Error, SchemeId};

/// Servers of a breach deployment: `n = 2` (Günther 2019, section 4.3 uses two).
pub const SERVERS: usize = 2;
/// First bytes of the info body.
pub const INFO_MAGIC: [u8; 8] = *b"PIRbrInf";
/// Prologue of the info body.
pub const INFO: Prologue = Prologue {
    magic: &INFO_MAGIC,
    version: INFO_VERSION,
};
/// Version of the info body. 2: queries and answers travel in the signed-batch framing of
/// `pir-service` (database id, count, length-prefixed bodies) under scheme id `qdp`; a
/// version-1 client is refused here, before it sends a query in the old framing.
pub const INFO_VERSION: u16 = 2;
/// Domain separation of the info signature.
pub const INFO_DST: &[u8] = b"pir-breach info v1";
/// Message tag of a blinded request (QDP tags are 1 to 3).
pub const TAG_BLIND: u8 = 0x10;
/// Longest application header carried in the info body.
pub const MAX_HEADER_BYTES: usize = 4096;

/// A decoded info body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// `B`, blocks of the database.
    pub block_count: u64,
    /// `b`, bytes per block.
    pub block_size: usize,
    /// The server's position.
    pub server: usize,
    /// `n`.
    pub servers: usize,
    /// `r`.
    pub redundancy: usize,
    /// `c`.
    pub chunks: usize,
    /// Whether the server answers blinded requests.
    pub blinding: bool,
    /// The application's database header.
    pub header: Vec<u8>,
}

impl Info {
    /// Encodes the info body (without its signature). Errors if a count does not fit its
    /// field or the header is longer than [`MAX_HEADER_BYTES`].
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let field = |what: &str| Error::InvalidParameter(format!("{what} does not fit the info"));
        if self.header.len() > MAX_HEADER_BYTES {
            return Err(Error::Oversized {
                len: self.header.len(),
                limit: MAX_HEADER_BYTES,
            });
        }
        u32::try_from(self.block_size).map_err(|_| field("block size"))?;
        u16::try_from(self.server).map_err(|_| field("server position"))?;
        u16::try_from(self.servers).map_err(|_| field("server count"))?;
        u16::try_from(self.redundancy).map_err(|_| field("redundancy"))?;
        u32::try_from(self.chunks).map_err(|_| field("chunk count"))?;
        Ok(Codec::to_bytes(self))
    }

    /// Decodes an info body (without its signature); untrusted bytes.
    pub fn decode(body: &[u8]) -> Result<Info, Error> {
        <Self as Codec>::from_bytes(body, &())
    }
}

/// The info body (module documentation). [`Info::encode`] checks that every count fits its
/// field first; [`Codec::encode`] saturates one that does not.
impl Codec<'_> for Info {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        INFO.write(w);
        w.u64(self.block_count);
        w.u32(u32::try_from(self.block_size).unwrap_or(u32::MAX));
        w.u16(u16::try_from(self.server).unwrap_or(u16::MAX));
        w.u16(u16::try_from(self.servers).unwrap_or(u16::MAX));
        w.u16(u16::try_from(self.redundancy).unwrap_or(u16::MAX));
        w.u32(u32::try_from(self.chunks).unwrap_or(u32::MAX));
        w.u8(u8::from(self.blinding));
        w.short_bytes(&self.header[..self.header.len().min(MAX_HEADER_BYTES)]);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        INFO.read(r)?;
        let block_count = r.u64()?;
        let block_size = r.u32()? as usize;
        let server = usize::from(r.u16()?);
        let servers = usize::from(r.u16()?);
        let redundancy = usize::from(r.u16()?);
        let chunks = r.u32()? as usize;
        let blinding = match r.u8()? {
            0 => false,
            1 => true,
            other => {
                return Err(Error::UnknownValue {
                    field: "blinding flag",
                    found: u64::from(other),
                })
            }
        };
        let header = r.short_bytes(MAX_HEADER_BYTES)?.to_vec();
        Ok(Info {
            block_count,
            block_size,
            server,
            servers,
            redundancy,
            chunks,
            blinding,
            header,
        })
    }
}

/// Bytes of the Ed25519 signature after the info.
pub const SIGNATURE_BYTES: usize = 64;

/// The info reply (`GET /pir/v1/hint`, or a manifest request): `envelope(qdp, Manifest, info |
/// signature [64])`, the info borrowed and not yet decoded (its signature is checked first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InfoReply<'a> {
    /// The info body ([`Info`]), as signed.
    pub info: &'a [u8],
    /// Ed25519 over `info_statement(info)`.
    pub signature: [u8; SIGNATURE_BYTES],
}

impl<'a> Codec<'a> for InfoReply<'a> {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        let body = [self.info, &self.signature].concat();
        Envelope {
            scheme: SchemeId::Qdp,
            kind: MessageKind::Manifest,
            body: &body,
        }
        .encode(w);
    }

    fn decode(r: &mut Reader<'a>, _: &()) -> Result<Self, Error> {
        // The envelope is the whole reply (the transport bounds its size).
        let max = r.remaining();
        let envelope = Envelope::decode(r, &max)?;
        if envelope.scheme != SchemeId::Qdp {
            return Err(Error::WrongScheme {
                found: envelope.scheme as u8,
                expected: SchemeId::Qdp as u8,
            });
        }
        if envelope.kind != MessageKind::Manifest {
            return Err(Error::WrongKind {
                found: envelope.kind as u8,
                expected: MessageKind::Manifest as u8,
            });
        }
        let mut body = Reader::new(envelope.body);
        let remaining = body.remaining();
        let info_len = remaining
            .checked_sub(SIGNATURE_BYTES)
            .ok_or(Error::Truncated {
                needed: SIGNATURE_BYTES.saturating_sub(remaining),
            })?;
        Ok(Self {
            info: body.take(info_len)?,
            signature: body.array()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_vectors_are_refused() {
        use pir_core::codec::testing::{
            check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector,
        };
        let good = info().encode().unwrap();
        // Offsets: block count 10, block size 18, server 22, servers 24, redundancy 26,
        // chunks 28, blinding 32, header length 33, header 35.
        let vectors = [
            FailVector::new(
                "truncated",
                "Truncated",
                "header one byte short",
                cut(&good),
            ),
            FailVector::new(
                "trailing",
                "TrailingBytes",
                "a byte after the header",
                trailing(&good),
            ),
            FailVector::new(
                "blinding_flag",
                "UnknownValue",
                "blinding 2",
                patch(&good, 32, 1, 2),
            ),
            FailVector::new(
                "header_oversized",
                "Oversized",
                "header length 4097",
                patch(&good, 33, 2, 4097),
            ),
            FailVector::new(
                "header_above_bytes",
                "Truncated",
                "header length 10, 9 follow",
                patch(&good, 33, 2, 10),
            ),
        ];
        let dir = vectors_dir(env!("CARGO_MANIFEST_DIR"), "breach_info");
        check_fail_vectors::<Info>(&dir, &vectors, &());
    }

    #[test]
    fn info_reply_vectors_are_refused() {
        use pir_core::codec::testing::{check_format, envelope_trailing, FailVector, Patch};
        let info = info().encode().unwrap();
        let good = InfoReply {
            info: &info,
            signature: [9; SIGNATURE_BYTES],
        }
        .to_bytes();
        // Envelope: scheme 6, kind 7, length 8, body from 12.
        let body = (good.len() - 12) as u64;
        let fields: &[Patch<'_>] = &[
            ("wrong_scheme", "WrongScheme", "scheme Chor", 6, 1, 1),
            ("wrong_kind", "WrongKind", "kind Query", 7, 1, 1),
            (
                "length_above_bytes",
                "Truncated",
                "one more than follows",
                8,
                4,
                body + 1,
            ),
        ];
        let dir = env!("CARGO_MANIFEST_DIR");
        let short = Envelope {
            scheme: SchemeId::Qdp,
            kind: MessageKind::Manifest,
            body: &[0; SIGNATURE_BYTES - 1],
        }
        .to_bytes();
        let note = "a 63-byte body, shorter than a signature";
        let short = FailVector::new("no_signature", "Truncated", note, short);
        let extra = vec![envelope_trailing(&good), short];
        check_format::<InfoReply>(dir, "breach_info_reply", &good, &(), fields, extra);
    }

    fn info() -> Info {
        Info {
            block_count: 512,
            block_size: 320,
            server: 1,
            servers: 2,
            redundancy: 2,
            chunks: 2,
            blinding: true,
            header: b"db header".to_vec(),
        }
    }

    #[test]
    fn round_trips_and_rejects_every_bad_field() {
        let body = info().encode().unwrap();
        assert_eq!(Info::decode(&body).unwrap(), info());
        let mut magic = body.clone();
        magic[0] ^= 1;
        assert!(matches!(Info::decode(&magic), Err(Error::WrongMagic)));
        let mut version = body.clone();
        version[8] = 9;
        assert!(matches!(
            Info::decode(&version),
            Err(Error::WrongVersion { found: 9, .. })
        ));
        let mut flag = body.clone();
        flag[8 + 2 + 8 + 4 + 2 + 2 + 2 + 4] = 2;
        assert!(matches!(
            Info::decode(&flag),
            Err(Error::UnknownValue { found: 2, .. })
        ));
        for cut in 0..body.len() {
            assert!(Info::decode(&body[..cut]).is_err(), "cut {cut}");
        }
        let mut long = body.clone();
        long.push(0);
        assert!(Info::decode(&long).is_err());
        // a header length past the limit is refused before anything is taken
        let mut huge = body;
        let at = huge.len() - info().header.len() - 2;
        huge[at..at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(matches!(Info::decode(&huge), Err(Error::Oversized { .. })));
        let too_long = Info {
            header: vec![0; MAX_HEADER_BYTES + 1],
            ..info()
        };
        assert!(too_long.encode().is_err());
    }
}
