//! The wire format: one envelope for every message, and a small checked codec.
//!
//! ```text
//! envelope = magic "PIRw" (4 bytes)
//!          | version u16 LE (= 1)
//!          | scheme  u8   (SchemeId: 0 control, 1 Chor, 2 RAID-PIR)
//!          | kind    u8   (MessageKind)
//!          | length  u32 LE (bytes of body that follow; must equal what is left)
//!          | body
//! ```
//!
//! All integers are little-endian, written explicitly (never native byte order). A decoder
//! checks the magic, the version, the kind and the length *before* it looks at the body, and a
//! body decoder checks every length against the parameters before allocating anything.
//! Malformed input is an [`Error`], never a panic.

// The checked reader and writer live with the codec trait; every format uses them through
// this path too.
use crate::codec::Codec;
pub use crate::codec::{Reader, Writer};
use crate::{Error, SchemeId};

/// First bytes of every message.
pub const MAGIC: [u8; 4] = *b"PIRw";
/// The only envelope version this build speaks.
pub const VERSION: u16 = 1;
/// Size of the envelope header.
pub const HEADER_LEN: usize = 12;

/// The start of every `pir` binary format, on the wire and on disk: magic bytes, then the
/// format's version as a little-endian u16 (every format is listed in `docs/wire.md`).
///
/// [`Prologue::read`] checks the magic before anything else and refuses other versions with
/// [`Error::WrongVersion`], so a file or message of a newer `pir` fails clearly instead of
/// being misread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prologue {
    /// The magic bytes (4 or 8).
    pub magic: &'static [u8],
    /// The version this build reads and writes.
    pub version: u16,
}

impl Prologue {
    /// Bytes of the prologue.
    pub const fn len(&self) -> usize {
        self.magic.len() + 2
    }

    /// Never empty: a prologue has magic bytes and a version.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the magic and the version.
    pub fn write(&self, w: &mut Writer) {
        w.bytes(self.magic);
        w.u16(self.version);
    }

    /// Reads and checks the magic and the version.
    pub fn read(&self, r: &mut Reader<'_>) -> Result<(), Error> {
        if r.take(self.magic.len())? != self.magic {
            return Err(Error::WrongMagic);
        }
        let found = r.u16()?;
        if found != self.version {
            return Err(Error::WrongVersion {
                found,
                supported: self.version,
            });
        }
        Ok(())
    }
}

/// The prologue of the message envelope.
pub const ENVELOPE: Prologue = Prologue {
    magic: &MAGIC,
    version: VERSION,
};

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MessageKind {
    /// Client to server: one or more PIR queries.
    Query = 1,
    /// Server to client: the answers, signed.
    Answer = 2,
    /// Server to client: why a request was refused.
    Error = 3,
    /// Client to server: send me the signed manifest.
    ManifestRequest = 4,
    /// Server to client: the signed manifest.
    Manifest = 5,
    /// Client to server: which releases do you serve?
    ReleasesRequest = 6,
    /// Server to client: the releases it serves (id, version, expiry each; unsigned, a hint).
    Releases = 7,
}

impl MessageKind {
    /// Parses the kind byte.
    pub fn from_byte(byte: u8) -> Result<Self, Error> {
        match byte {
            1 => Ok(Self::Query),
            2 => Ok(Self::Answer),
            3 => Ok(Self::Error),
            4 => Ok(Self::ManifestRequest),
            5 => Ok(Self::Manifest),
            6 => Ok(Self::ReleasesRequest),
            7 => Ok(Self::Releases),
            other => Err(Error::UnknownValue {
                field: "message kind",
                found: u64::from(other),
            }),
        }
    }
}

/// A decoded envelope: the header fields and a borrowed body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The scheme the body belongs to.
    pub scheme: SchemeId,
    /// What the body is.
    pub kind: MessageKind,
    /// The body, exactly `length` bytes.
    pub body: &'a [u8],
}

/// Wraps `body` in an envelope.
pub fn encode_envelope(scheme: SchemeId, kind: MessageKind, body: &[u8]) -> Vec<u8> {
    let mut w = Writer::with_capacity(HEADER_LEN + body.len());
    Envelope { scheme, kind, body }.encode(&mut w);
    w.into_bytes()
}

/// Parses an envelope, refusing bodies longer than `max_body` before touching them.
pub fn decode_envelope(bytes: &[u8], max_body: usize) -> Result<Envelope<'_>, Error> {
    Envelope::from_bytes(bytes, &max_body)
}

/// The envelope is a whole message: its body is everything after the header, so a decoder
/// given more bytes than the length field says refuses them as [`Error::WrongLength`]. The
/// context is the largest body accepted.
impl<'a> Codec<'a> for Envelope<'a> {
    type Context = usize;

    fn encode(&self, w: &mut Writer) {
        ENVELOPE.write(w);
        w.u8(self.scheme as u8);
        w.u8(self.kind as u8);
        // Bodies are bounded far below 4 GiB by the parameters (see `decode`).
        w.u32(u32::try_from(self.body.len()).unwrap_or(u32::MAX));
        w.bytes(self.body);
    }

    fn decode(r: &mut Reader<'a>, max_body: &usize) -> Result<Self, Error> {
        ENVELOPE.read(r)?;
        let scheme = SchemeId::from_byte(r.u8()?)?;
        let kind = MessageKind::from_byte(r.u8()?)?;
        let len = r.u32()? as usize;
        if len > *max_body {
            return Err(Error::Oversized {
                len,
                limit: *max_body,
            });
        }
        if r.remaining() > len {
            return Err(Error::WrongLength(format!(
                "envelope declares {len} body bytes but {} follow",
                r.remaining()
            )));
        }
        Ok(Envelope {
            scheme,
            kind,
            body: r.take(len)?,
        })
    }
}

/// Why a server refused a request; carried in an [`MessageKind::Error`] body as
/// `code u16 LE | message length u16 LE | UTF-8 message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The request bytes were malformed.
    BadRequest = 1,
    /// The query was made for another release or database shape.
    WrongDatabase = 2,
    /// The scheme is not served here.
    UnsupportedScheme = 3,
    /// The server failed; retry elsewhere.
    Internal = 4,
    /// A part of the service is down (a shard behind a front end has no live replica); the
    /// message names it. Retry later.
    Unavailable = 5,
    /// The query names key material (a key id) the server does not hold (never uploaded,
    /// expired or evicted): upload the keys again and retry.
    UnknownKey = 6,
}

/// Longest error message a server sends or a client accepts.
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// A decoded error body: the raw code (a newer server may send codes this build does not
/// know) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    /// The [`ErrorCode`] as sent.
    pub code: u16,
    /// Why, in words (at most [`MAX_ERROR_MESSAGE`] bytes of UTF-8).
    pub message: String,
}

impl ErrorBody {
    /// An error body; the message is cut to [`MAX_ERROR_MESSAGE`] bytes on a char boundary.
    pub fn new(code: ErrorCode, message: &str) -> Self {
        let mut end = message.len().min(MAX_ERROR_MESSAGE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        Self {
            code: code as u16,
            message: message[..end].to_owned(),
        }
    }
}

impl Codec<'_> for ErrorBody {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.u16(self.code);
        // `new` keeps the message within MAX_ERROR_MESSAGE, far below 64 KiB.
        w.short_bytes(self.message.as_bytes());
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        let code = r.u16()?;
        let message = std::str::from_utf8(r.short_bytes(MAX_ERROR_MESSAGE)?)
            .map_err(|_| Error::Malformed("error message is not UTF-8".into()))?
            .to_owned();
        Ok(Self { code, message })
    }
}

/// Encodes an error body (message truncated to [`MAX_ERROR_MESSAGE`] bytes on a char boundary).
pub fn encode_error(code: ErrorCode, message: &str) -> Vec<u8> {
    ErrorBody::new(code, message).to_bytes()
}

/// Decodes an error body into its raw code and message.
pub fn decode_error(body: &[u8]) -> Result<(u16, String), Error> {
    let ErrorBody { code, message } = ErrorBody::from_bytes(body, &())?;
    Ok((code, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn envelope_round_trip() {
        let bytes = encode_envelope(SchemeId::Chor, MessageKind::Query, b"hello");
        assert_eq!(&bytes[..4], b"PIRw");
        assert_eq!(bytes.len(), HEADER_LEN + 5);
        let env = decode_envelope(&bytes, 100).unwrap();
        assert_eq!(env.scheme, SchemeId::Chor);
        assert_eq!(env.kind, MessageKind::Query);
        assert_eq!(env.body, b"hello");
    }

    #[test]
    fn envelope_rejects_every_malformed_class() {
        let good = encode_envelope(SchemeId::RaidPir, MessageKind::Answer, &[7; 32]);
        // truncated header and truncated body
        assert!(matches!(
            decode_envelope(&good[..5], 100),
            Err(Error::Truncated { .. })
        ));
        assert!(matches!(
            decode_envelope(&good[..good.len() - 1], 100),
            Err(Error::Truncated { .. })
        ));
        // oversized
        assert!(matches!(
            decode_envelope(&good, 31),
            Err(Error::Oversized { len: 32, limit: 31 })
        ));
        // trailing bytes
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            decode_envelope(&long, 100),
            Err(Error::WrongLength(_))
        ));
        // wrong magic
        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(decode_envelope(&bad, 100), Err(Error::WrongMagic));
        // wrong version
        let mut bad = good.clone();
        bad[4] = 2;
        assert_eq!(
            decode_envelope(&bad, 100),
            Err(Error::WrongVersion {
                found: 2,
                supported: 1
            })
        );
        // unknown scheme
        let mut bad = good.clone();
        bad[6] = 99;
        assert!(matches!(
            decode_envelope(&bad, 100),
            Err(Error::WrongScheme { found: 99, .. })
        ));
        // unknown kind
        let mut bad = good;
        bad[7] = 42;
        assert!(matches!(
            decode_envelope(&bad, 100),
            Err(Error::UnknownValue {
                field: "message kind",
                found: 42
            })
        ));
    }

    #[test]
    fn error_body_round_trip_and_limits() {
        let body = encode_error(ErrorCode::WrongDatabase, "stale release");
        assert_eq!(
            decode_error(&body).unwrap(),
            (2, "stale release".to_string())
        );
        let long = "é".repeat(MAX_ERROR_MESSAGE);
        let (_, text) = decode_error(&encode_error(ErrorCode::Internal, &long)).unwrap();
        assert!(text.len() <= MAX_ERROR_MESSAGE);
        let mut bad = encode_error(ErrorCode::BadRequest, "x");
        bad[4] = 0xff;
        assert!(decode_error(&bad).is_err());
        assert!(decode_error(&[1]).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_envelope(&bytes, 32);
            let _ = decode_error(&bytes);
        }

        #[test]
        fn envelope_round_trips(body in proptest::collection::vec(any::<u8>(), 0..300), kind in 1u8..=5, scheme in 0u8..=5) {
            let kind = MessageKind::from_byte(kind).unwrap();
            let scheme = SchemeId::from_byte(scheme).unwrap();
            let bytes = encode_envelope(scheme, kind, &body);
            let env = decode_envelope(&bytes, 300).unwrap();
            prop_assert_eq!(env, Envelope { scheme, kind, body: &body });
        }
    }
}
