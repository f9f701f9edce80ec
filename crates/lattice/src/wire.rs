//! Wire bodies of SimplePIR and DoublePIR, inside the `pir_core::wire` envelope (magic `PIRw`,
//! version 1, scheme id 3 = SimplePIR or 4 = DoublePIR, kind, length). All integers are
//! little-endian; every length is computed from the parameters and checked before anything
//! is allocated; decoders return errors, never panic.
//!
//! ```text
//! hint (kind Manifest: the offline download that describes the database)
//!   contents    u8       1 = header only, 2 = header and hint matrix
//!   n           u16      LWE dimension: 1280 (SimplePIR, DoublePIR), 1024 (YPIR's d1)
//!   p           u32      plaintext modulus (at most the table value for the shape)
//!   rows        u32      ℓ
//!   columns     u32      m
//!   record_bits u32      bits per record
//!   records     u64      N
//!   seed        16 B     AES-128 key of A (DoublePIR: A1)            (see crate::prg)
//!   seed2       16 B     DoublePIR only: AES-128 key of A2
//!   version     32 B     the server's database version (a digest chosen by the caller)
//!   matrix      u32 × …  contents = 2 only: SimplePIR H = D'A (ℓ × n, row-major);
//!                        DoublePIR H2 = Decomp(H1ᵀ)'A2 (κn × n)
//!
//! query (kind Query)
//!   version     32 B     must equal the server's (else DatabaseMismatch: fetch the hint again)
//!   c           u32 × m  SimplePIR c = A s + e + Δ u_column; DoublePIR c1 likewise
//!   c2          u32 × ℓ  DoublePIR only, once per entry of the record (c2 = A2 s2 + e2 + Δ u_row)
//!
//! answer (kind Answer)
//!   SimplePIR   u32 × ℓ               D' c
//!   DoublePIR   u32 × κn              h = Decomp(D'c1)'A2, then per c2:
//!               u32 × κn, u32 × κ     Decomp(H1ᵀ)'c2 and Decomp(D'c1)'c2
//! ```
//!
//! A client compares `version` in a header-only message with its cached hint's to decide
//! whether to download the hint again.

use pir_core::wire::{decode_envelope, encode_envelope, MessageKind, Reader, Writer};
use pir_core::{Codec, Error};

use crate::params::{Params, Scheme, LWE_N, MAX_ROWS};
use crate::prg::{Seed, SEED_LEN};

/// Length of a database version.
pub use crate::params::VERSION_LEN;

/// The server's database version: an opaque digest the caller derives from the records and
/// the seeds (for example SHA-256 of both); it must change whenever either changes.
pub type DbVersion = [u8; VERSION_LEN];

const HEADER_ONLY: u8 = 1;
const WITH_MATRIX: u8 = 2;

/// Largest hint body accepted: the header plus `MAX_ROWS · n` words.
pub const MAX_HINT_BODY: usize = 128 + MAX_ROWS as usize * LWE_N * 4;

/// What a hint says about the database, without the hint matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintHeader {
    /// The database shape and plaintext modulus.
    pub params: Params,
    /// Seed of `A` (DoublePIR: `A1`).
    pub seed: Seed,
    /// DoublePIR: seed of `A2`; `None` for SimplePIR.
    pub seed2: Option<Seed>,
    /// The database version the hint was computed for.
    pub version: DbVersion,
}

impl HintHeader {
    fn body_len(&self) -> usize {
        1 + 2 + 4 * 4 + 8 + SEED_LEN + self.seed2.map_or(0, |_| SEED_LEN) + VERSION_LEN
    }

    fn write(&self, w: &mut Writer, contents: u8) {
        let p = &self.params;
        w.u8(contents);
        w.u16(p.n() as u16);
        w.u32(p.p);
        w.u32(p.rows);
        w.u32(p.columns);
        w.u32(p.record_bits);
        w.u64(p.records);
        w.bytes(&self.seed);
        if let Some(seed2) = &self.seed2 {
            w.bytes(seed2);
        }
        w.bytes(&self.version);
    }

    /// Words of the hint matrix: `ℓ n` (SimplePIR) or `κ n n` (DoublePIR).
    pub fn matrix_words(&self) -> usize {
        match self.params.scheme {
            Scheme::SimplePir => self.params.rows() * LWE_N,
            Scheme::DoublePir => self.params.digits() * LWE_N * LWE_N,
            Scheme::Ypir | Scheme::YpirSp | Scheme::Inspire => 0,
        }
    }

    /// A header-only message (for clients checking whether their hint is current).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.body_len());
        self.write(&mut w, HEADER_ONLY);
        encode_envelope(
            self.params.scheme.id(),
            MessageKind::Manifest,
            &w.into_bytes(),
        )
    }
}

/// The full hint message: header and matrix (`matrix.len()` must be
/// [`HintHeader::matrix_words`]).
pub fn encode_hint(header: &HintHeader, matrix: &[u32]) -> Vec<u8> {
    let mut w = Writer::with_capacity(header.body_len() + 4 * matrix.len());
    header.write(&mut w, WITH_MATRIX);
    put_words(&mut w, matrix);
    encode_envelope(
        header.params.scheme.id(),
        MessageKind::Manifest,
        &w.into_bytes(),
    )
}

/// Decodes a full hint message (header and matrix), as a client needs it; a header-only
/// message is refused.
pub fn decode_full_hint(bytes: &[u8], scheme: Scheme) -> Result<(HintHeader, Vec<u32>), Error> {
    let (header, matrix) = decode_hint(bytes, scheme)?;
    let matrix = matrix.ok_or(Error::UnknownValue {
        field: "hint contents (header only, where a hint is needed)",
        found: u64::from(HEADER_ONLY),
    })?;
    Ok((header, matrix))
}

/// Parses a hint or header-only message of `scheme`; returns the header and, for a full
/// hint, the matrix (allocated only after its length was checked against the header).
pub fn decode_hint(bytes: &[u8], scheme: Scheme) -> Result<(HintHeader, Option<Vec<u32>>), Error> {
    let body = open(bytes, scheme, MessageKind::Manifest, MAX_HINT_BODY)?;
    let hint = HintBody::from_bytes(body, &scheme)?;
    Ok((hint.header, hint.matrix))
}

/// The body of a hint message (inside the envelope): the header and, for a full hint, the
/// matrix. The context is the scheme, which the envelope names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintBody {
    /// What the hint says about the database.
    pub header: HintHeader,
    /// The hint matrix ([`HintHeader::matrix_words`] words); `None` in a header-only message.
    pub matrix: Option<Vec<u32>>,
}

impl Codec<'_> for HintBody {
    type Context = Scheme;

    fn encode(&self, w: &mut Writer) {
        match &self.matrix {
            None => self.header.write(w, HEADER_ONLY),
            Some(matrix) => {
                self.header.write(w, WITH_MATRIX);
                put_words(w, matrix);
            }
        }
    }

    fn decode(r: &mut Reader<'_>, scheme: &Scheme) -> Result<Self, Error> {
        let scheme = *scheme;
        let contents = r.u8()?;
        if contents != HEADER_ONLY && contents != WITH_MATRIX {
            return Err(Error::UnknownValue {
                field: "hint contents",
                found: u64::from(contents),
            });
        }
        let n = r.u16()?;
        let expected = match scheme {
            Scheme::SimplePir | Scheme::DoublePir => LWE_N,
            Scheme::Ypir | Scheme::YpirSp => crate::params::ypir::D1,
            Scheme::Inspire => crate::params::inspire::D,
        };
        if usize::from(n) != expected {
            return Err(Error::Malformed(format!(
                "LWE dimension {n}; this build only accepts {expected} for {} (a hint \
                 made with another dimension: rebuild or re-download it)",
                scheme.id().name()
            )));
        }
        let p = r.u32()?;
        let rows = r.u32()?;
        let columns = r.u32()?;
        let record_bits = r.u32()?;
        let records = r.u64()?;
        let params = Params {
            scheme,
            records,
            record_bits,
            rows,
            columns,
            p,
        };
        params.validate()?;
        let seed = r.array::<SEED_LEN>()?;
        let seed2 = match scheme.two_seeds() {
            true => Some(r.array::<SEED_LEN>()?),
            false => None,
        };
        let version = r.array::<VERSION_LEN>()?;
        let header = HintHeader {
            params,
            seed,
            seed2,
            version,
        };
        // A header-only message ends here: `from_bytes` refuses bytes after it.
        let matrix = match contents {
            WITH_MATRIX => Some(words(r, header.matrix_words())?),
            _ => None,
        };
        Ok(Self { header, matrix })
    }
}

/// A query message: the version, then the vectors in order.
pub fn encode_query(scheme: Scheme, version: &DbVersion, vectors: &[&[u32]]) -> Vec<u8> {
    let len: usize = vectors.iter().map(|v| v.len()).sum();
    let mut w = Writer::with_capacity(VERSION_LEN + 4 * len);
    w.bytes(version);
    for v in vectors {
        put_words(&mut w, v);
    }
    encode_envelope(scheme.id(), MessageKind::Query, &w.into_bytes())
}

/// What a SimplePIR or DoublePIR query body is checked against: the database's parameters
/// (its length) and version (a query for another version is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryContext {
    /// The database's parameters.
    pub params: Params,
    /// The server's database version.
    pub version: DbVersion,
}

/// The body of a SimplePIR or DoublePIR query (inside the envelope): the version, then
/// [`query_words`] words (the vectors, concatenated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryBody {
    /// The database version the query was made for.
    pub version: DbVersion,
    /// The query's vectors, in order.
    pub words: Vec<u32>,
}

impl Codec<'_> for QueryBody {
    type Context = QueryContext;

    fn encode(&self, w: &mut Writer) {
        w.bytes(&self.version);
        put_words(w, &self.words);
    }

    fn decode(r: &mut Reader<'_>, context: &QueryContext) -> Result<Self, Error> {
        let version = r.array::<VERSION_LEN>()?;
        if version != context.version {
            return Err(Error::DatabaseMismatch(
                "the query was made for another version of the database; fetch the hint again"
                    .into(),
            ));
        }
        let words = words(r, query_words(&context.params))?;
        Ok(Self { version, words })
    }
}

/// Words a query for `params` carries: `m`, plus `R ℓ` for DoublePIR (`R` entries per record).
pub fn query_words(params: &Params) -> usize {
    match params.scheme {
        Scheme::SimplePir => params.columns(),
        Scheme::DoublePir => params.columns() + params.entries_per_record() * params.rows(),
        // YPIR's query is not words: crate::ypir::wire.
        Scheme::Ypir | Scheme::YpirSp | Scheme::Inspire => 0,
    }
}

/// Parses a query for `params`, refusing other lengths (before allocating) and other versions.
pub fn decode_query(bytes: &[u8], params: &Params, version: &DbVersion) -> Result<Vec<u32>, Error> {
    let count = query_words(params);
    let body = open(
        bytes,
        params.scheme,
        MessageKind::Query,
        VERSION_LEN + 4 * count,
    )?;
    let context = QueryContext {
        params: *params,
        version: *version,
    };
    Ok(QueryBody::from_bytes(body, &context)?.words)
}

/// Parses a SimplePIR shard's part of a query (what a front end sends shard `k`: the
/// version, then the `count` words of `c` at its matrix columns), refusing other lengths
/// (before allocating) and other versions.
pub fn decode_query_part(
    bytes: &[u8],
    params: &Params,
    version: &DbVersion,
    count: usize,
) -> Result<Vec<u32>, Error> {
    let body = open(
        bytes,
        params.scheme,
        MessageKind::Query,
        VERSION_LEN + 4 * count,
    )?;
    let mut r = Reader::new(body);
    if r.array::<VERSION_LEN>()? != *version {
        return Err(Error::DatabaseMismatch(
            "the query was made for another version of the database; fetch the hint again".into(),
        ));
    }
    words(&mut r, count)
}

/// Words an answer for `params` carries: `ℓ` (SimplePIR) or `κn + R(κn + κ)` (DoublePIR).
pub fn answer_words(params: &Params) -> usize {
    match params.scheme {
        Scheme::SimplePir => params.rows(),
        Scheme::DoublePir => {
            let kappa = params.digits();
            kappa * LWE_N + params.entries_per_record() * (kappa * LWE_N + kappa)
        }
        // YPIR's answer is packed ciphertexts: crate::ypir::wire.
        Scheme::Ypir | Scheme::YpirSp | Scheme::Inspire => 0,
    }
}

/// Bytes of a query body for `params`, every scheme (the version included).
pub fn query_body_bytes(params: &Params) -> usize {
    match params.scheme {
        Scheme::Ypir | Scheme::YpirSp => {
            crate::params::ypir::lengths_of(params).map_or(0, |l| l.query_bytes())
        }
        Scheme::Inspire => {
            crate::params::inspire::Shape::of(params).map_or(0, |s| s.query_bytes_upload())
        }
        _ => VERSION_LEN + 4 * query_words(params),
    }
}

/// Bytes of the body of a query once the server holds the client's uploaded keys (YPIR and
/// YPIR+SP: the keys named by key id; other schemes have no keys: [`query_body_bytes`]).
pub fn later_query_body_bytes(params: &Params) -> usize {
    match params.scheme {
        Scheme::Ypir | Scheme::YpirSp => {
            crate::params::ypir::lengths_of(params).map_or(0, |l| l.query_bytes_by_id())
        }
        Scheme::Inspire => {
            crate::params::inspire::Shape::of(params).map_or(0, |s| s.query_bytes_cached())
        }
        _ => query_body_bytes(params),
    }
}

/// Bytes of an answer body for `params`, every scheme.
pub fn answer_body_bytes(params: &Params) -> usize {
    match params.scheme {
        Scheme::Ypir | Scheme::YpirSp => {
            crate::params::ypir::lengths_of(params).map_or(0, |l| l.answer_bytes())
        }
        Scheme::Inspire => {
            crate::params::inspire::Shape::of(params).map_or(0, |s| s.answer_bytes())
        }
        _ => 4 * answer_words(params),
    }
}

/// An answer message.
pub fn encode_answer(scheme: Scheme, words: &[u32]) -> Vec<u8> {
    let mut w = Writer::with_capacity(4 * words.len());
    put_words(&mut w, words);
    encode_envelope(scheme.id(), MessageKind::Answer, &w.into_bytes())
}

/// Parses an answer for `params`, refusing any other length before allocating.
pub fn decode_answer(bytes: &[u8], params: &Params) -> Result<Vec<u32>, Error> {
    let count = answer_words(params);
    let body = open(bytes, params.scheme, MessageKind::Answer, 4 * count)?;
    Ok(AnswerBody::from_bytes(body, params)?.0)
}

/// The body of a SimplePIR or DoublePIR answer (inside the envelope): exactly
/// [`answer_words`] words for the context's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerBody(pub Vec<u32>);

impl Codec<'_> for AnswerBody {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        put_words(w, &self.0);
    }

    fn decode(r: &mut Reader<'_>, params: &Params) -> Result<Self, Error> {
        words(r, answer_words(params)).map(Self)
    }
}

/// Checks the envelope (scheme, kind, length at most `max_body`) and returns the body.
pub(crate) fn open(
    bytes: &[u8],
    scheme: Scheme,
    kind: MessageKind,
    max_body: usize,
) -> Result<&[u8], Error> {
    let envelope = decode_envelope(bytes, max_body)?;
    if envelope.scheme != scheme.id() {
        return Err(Error::WrongScheme {
            found: envelope.scheme as u8,
            expected: scheme.id() as u8,
        });
    }
    if envelope.kind != kind {
        return Err(Error::WrongKind {
            found: envelope.kind as u8,
            expected: kind as u8,
        });
    }
    Ok(envelope.body)
}

fn put_words(w: &mut Writer, words: &[u32]) {
    for &x in words {
        w.u32(x);
    }
}

/// Reads exactly `count` words and requires the reader to be empty afterwards; the length is
/// checked before the vector is allocated.
fn words(r: &mut Reader<'_>, count: usize) -> Result<Vec<u32>, Error> {
    let need = count
        .checked_mul(4)
        .ok_or_else(|| Error::Malformed("length overflow".into()))?;
    if r.remaining() != need {
        return Err(Error::WrongLength(format!(
            "expected {need} bytes of matrix or vector, found {}",
            r.remaining()
        )));
    }
    let bytes = r.take(need)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header() -> HintHeader {
        HintHeader {
            params: Params::new(Scheme::SimplePir, 20, 8).unwrap(),
            seed: [0x11; 16],
            seed2: None,
            version: [0xab; 32],
        }
    }

    /// A pinned SimplePIR query: 20 one-byte records lay out as 4 rows × 5 columns (p = 256),
    /// so the query is the version and m = 5 words.
    #[test]
    fn query_known_answer() {
        let h = header();
        assert_eq!((h.params.rows, h.params.columns, h.params.p), (4, 5, 256));
        let words = [1, 0x0102_0304, u32::MAX, 0, 7];
        let bytes = encode_query(Scheme::SimplePir, &h.version, &[&words]);
        let expect = concat!(
            "50495277",
            "0100",
            "03",
            "01",
            "34000000", // PIRw, v1, SimplePIR, Query, 52 bytes
            "abababababababababababababababababababababababababababababababab",
            "01000000",
            "04030201",
            "ffffffff",
            "00000000",
            "07000000"
        );
        assert_eq!(hex::encode(&bytes), expect);
        assert_eq!(decode_query(&bytes, &h.params, &h.version).unwrap(), words);
    }

    #[test]
    fn malformed_queries_are_rejected() {
        let h = header();
        let good = encode_query(Scheme::SimplePir, &h.version, &[&[1, 2, 3, 4, 5]]);
        let decode = |b: &[u8]| decode_query(b, &h.params, &h.version);
        assert!(matches!(
            decode(&good[..good.len() - 4]),
            Err(Error::Truncated { .. })
        ));
        let long = encode_query(Scheme::SimplePir, &h.version, &[&[1, 2, 3, 4, 5, 6]]);
        assert!(matches!(decode(&long), Err(Error::Oversized { .. })));
        let short = encode_query(Scheme::SimplePir, &h.version, &[&[1, 2, 3, 4]]);
        assert!(matches!(decode(&short), Err(Error::WrongLength(_))));
        let other = encode_query(Scheme::DoublePir, &h.version, &[&[1, 2, 3, 4, 5]]);
        assert!(matches!(
            decode(&other),
            Err(Error::WrongScheme {
                found: 4,
                expected: 3
            })
        ));
        let stale = encode_query(Scheme::SimplePir, &[0; 32], &[&[1, 2, 3, 4, 5]]);
        assert!(matches!(decode(&stale), Err(Error::DatabaseMismatch(_))));
        let mut version = good.clone();
        version[4] = 9;
        assert!(matches!(
            decode(&version),
            Err(Error::WrongVersion { found: 9, .. })
        ));
        let answer = encode_answer(Scheme::SimplePir, &[0; 8]);
        assert!(matches!(decode(&answer), Err(Error::WrongKind { .. })));
    }

    #[test]
    fn hints_round_trip_and_reject_tampering() {
        let h = header();
        let matrix: Vec<u32> = (0..h.matrix_words() as u32).collect();
        let bytes = encode_hint(&h, &matrix);
        let (back, m) = decode_hint(&bytes, Scheme::SimplePir).unwrap();
        assert_eq!((back, m.as_deref()), (h, Some(matrix.as_slice())));
        let (only, none) = decode_hint(&h.encode(), Scheme::SimplePir).unwrap();
        assert_eq!((only, none), (h, None));
        // Byte offsets in the body (after the 12-byte envelope header): contents 0, n 1,
        // p 3, rows 7, columns 11.
        for (offset, value) in [(12, 7u8), (14, 0), (16, 0xff), (19, 9), (23, 0)] {
            let mut bad = bytes.clone();
            bad[offset] = value;
            assert!(
                decode_hint(&bad, Scheme::SimplePir).is_err(),
                "offset {offset}"
            );
        }
        assert!(decode_hint(&bytes[..bytes.len() - 4], Scheme::SimplePir).is_err());
        assert!(matches!(
            decode_hint(&bytes, Scheme::DoublePir),
            Err(Error::WrongScheme { .. })
        ));
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), cut in 0usize..120) {
            let h = header();
            let _ = decode_hint(&bytes, Scheme::SimplePir);
            let _ = decode_hint(&bytes, Scheme::DoublePir);
            let _ = decode_query(&bytes, &h.params, &h.version);
            let _ = decode_answer(&bytes, &h.params);
            // valid prefix followed by garbage
            let mut spliced = h.encode();
            spliced.truncate(cut.min(spliced.len()));
            spliced.extend_from_slice(&bytes);
            let _ = decode_hint(&spliced, Scheme::SimplePir);
        }
    }
}
