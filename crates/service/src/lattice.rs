//! The sans-I/O single-server service: SimplePIR, DoublePIR or YPIR ([`pir_lattice`])
//! behind the same request/reply envelopes and runtime as the mirrors.
//!
//! Unlike the mirrors, privacy does not rest on servers not colluding: a query is an LWE
//! ciphertext, pseudorandom to the server, and the server's work and reply size depend only
//! on the database shape. The price is the hint every client downloads once per database
//! version, and more work per query.
//!
//! ```text
//! GET /pir/v1/hint (offline download; see crate::runtime)
//!   envelope(scheme, Manifest, body)
//!   body        = about_len u32 | about | hint
//!   about       at most MAX_ABOUT_BYTES, opaque here: what the application says about the
//!               records (pir-records puts its record/key-value layout there)
//!   hint        the pir_lattice::wire hint message (it carries the database version)
//!
//! POST /pir/v1
//!   envelope(control or scheme, ManifestRequest, empty)
//!                                             -> the header-only hint message (kind Manifest):
//!                                                a client compares its version with its
//!                                                cached hint's before downloading again
//!   envelope(scheme, Query, query batch)       -> envelope(scheme, Answer, payload | signature)
//!     query batch = pir_core::protocol query batch: release id = the database version,
//!                   1..=MAX_QUERIES_PER_REQUEST pir_lattice::wire query messages
//!     payload     = pir_core::protocol answer payload (version, one lattice answer each)
//!     signature   = Ed25519 over pir_keys::answer_statement(version, request, payload)
//! ```
//!
//! Answers are signed with the server key, like the mirrors' (upPIR, Cappos 2013, section 4.2),
//! on top of TLS pinned to the same key; the hint and header travel over that pinned TLS.
//! A stale version gets `WrongDatabase`, so the client fetches the hint again.

use bytes::Bytes;
use pir_core::wire::{self, MessageKind, Reader, Writer};
use pir_core::{Codec, Error, SchemeId};
use pir_keys::SecretKey;
use pir_lattice::{DbVersion, HintHeader, Params, Scheme, Seed, SingleServer};

use crate::signed::{Backend, Refusal, SignedService};

/// Most lattice queries in one request: a key-value lookup needs two, a few records more.
/// Bounds the work and the request size one client can ask for at once.
pub const MAX_QUERIES_PER_REQUEST: usize = 16;
/// What a client whose batch names another database version is told (a single server's and
/// a front end's words).
pub const STALE: &str = "the database changed: download the hint again";
/// Largest application description carried next to the hint.
pub const MAX_ABOUT_BYTES: usize = 64 * 1024;

/// A single-server PIR server on the network: [`Lattice`] behind the signed-batch service.
pub type LatticeService = SignedService<Lattice>;

/// What a lattice service is built from.
#[derive(Debug, Clone)]
pub struct LatticeDatabase<'a> {
    /// SimplePIR, DoublePIR or YPIR (YPIR+SP for records over 8 bytes).
    pub scheme: Scheme,
    /// The records, back to back (`records × record_bytes` bytes).
    pub records: &'a [u8],
    /// Number of records.
    pub record_count: u64,
    /// Bytes per record.
    pub record_bytes: usize,
    /// Seeds of the public matrices (`A`, and `A2` for DoublePIR), kept with the database so
    /// a restart gives the same hint.
    pub seeds: [Seed; 2],
    /// The database version (a digest of the records, the seeds and the scheme).
    pub version: DbVersion,
    /// Served next to the hint, opaque here (at most [`MAX_ABOUT_BYTES`]).
    pub about: Vec<u8>,
}

/// A single-server PIR backend: the packed database, its hint download and header.
pub struct Lattice {
    server: Box<dyn SingleServer>,
    header_message: Vec<u8>,
    download: Bytes,
    query_bytes: usize,
    /// What query batches name: the database version, or a shard's part id.
    database_id: [u8; 32],
}

impl std::fmt::Debug for Lattice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lattice")
            .field("header", self.header())
            .finish_non_exhaustive()
    }
}

impl Lattice {
    /// Every scheme a lattice backend may serve (one per database; `accepts` names its own).
    pub const SCHEMES: &'static [SchemeId] = &[
        SchemeId::SimplePir,
        SchemeId::DoublePir,
        SchemeId::Ypir,
        SchemeId::YpirSp,
        SchemeId::Inspire,
    ];

    /// Lays the records out, computes the hint (`progress(done, total)` follows it: this is
    /// the slow part, one pass of `n` (1280) multiply-adds per database entry) and prepares
    /// the download.
    pub fn new(
        database: LatticeDatabase<'_>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, Error> {
        Self::with_saved(database, None, progress).map(|(lattice, _)| lattice)
    }

    /// [`Lattice::new`], reusing `saved` offline work (the hint, and DoublePIR's `H1`) when it
    /// belongs to this database; an error if it does not (the caller then computes afresh).
    /// Also returns the offline work to keep next to the database.
    pub fn with_saved(
        database: LatticeDatabase<'_>,
        saved: Option<pir_lattice::Saved>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(Self, pir_lattice::Saved), Error> {
        if database.about.len() > MAX_ABOUT_BYTES {
            return Err(Error::InvalidParameter(format!(
                "the database description is {} bytes; at most {MAX_ABOUT_BYTES}",
                database.about.len()
            )));
        }
        let record_bits = u32::try_from(database.record_bytes)
            .ok()
            .and_then(|b| b.checked_mul(8))
            .ok_or_else(|| Error::InvalidParameter("records are too large".into()))?;
        let params = Params::new(database.scheme, database.record_count, record_bits)?;
        let (server, offline) = pir_lattice::build_server_saved(
            params,
            database.records,
            database.seeds,
            database.version,
            saved,
            progress,
        )?;
        Ok((Self::assemble(server, &offline, &database.about), offline))
    }

    /// A shard of a SimplePIR, DoublePIR or YPIR database: `slice` is the range of the
    /// matrix that the scheme's answer is additive over, and `database.records` holds only
    /// its bytes. SimplePIR: matrix *columns* (runs of consecutive records), the bytes
    /// [`pir_lattice::simple::column_bytes`]; DoublePIR and YPIR: matrix *rows* (strided sets
    /// of records; YPIR's whole row groups), the part [`pir_lattice::double_rows::row_part`].
    /// A YPIR shard's hint download holds its offline part and its answers are parts before
    /// the packing step ([`pir_lattice::ypir::shard`]), for `crate::shard::YpirFront`. `record_count`, `version`
    /// and `about` are the whole database's. Its hint and answers are its part of the whole
    /// ones (`crate::shard` says why they add up), and its query batches must name `part_id`
    /// (`crate::shard::ShardMap::part_id`), so it answers only as this shard of this database.
    pub fn shard(
        database: LatticeDatabase<'_>,
        slice: std::ops::Range<usize>,
        part_id: [u8; 32],
        saved: Option<pir_lattice::Saved>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(Self, pir_lattice::Saved), Error> {
        if !matches!(
            database.scheme,
            Scheme::SimplePir | Scheme::DoublePir | Scheme::Ypir
        ) || database.about.len() > MAX_ABOUT_BYTES
        {
            return Err(Error::InvalidParameter(
                "only SimplePIR, DoublePIR and YPIR databases are sharded so far".into(),
            ));
        }
        let record_bits = u32::try_from(database.record_bytes * 8)
            .map_err(|_| Error::InvalidParameter("records are too large".into()))?;
        let params = Params::new(database.scheme, database.record_count, record_bits)?;
        let input = pir_lattice::BuildInput {
            params,
            records: database.records,
            seeds: database.seeds,
            version: database.version,
            saved,
            progress,
        };
        let (server, offline): (Box<dyn SingleServer>, _) = match database.scheme {
            Scheme::DoublePir => {
                let (server, offline) = pir_lattice::DoublePirServer::build_rows(input, slice)?;
                (Box::new(server), offline)
            }
            // Records over 8 bytes are laid out for YPIR+SP, whose shards are not built.
            Scheme::Ypir if params.scheme == Scheme::Ypir => {
                let (server, offline) = pir_lattice::ypir::YpirShard::build_rows(input, slice)?;
                (Box::new(server), offline)
            }
            Scheme::Ypir => {
                return Err(Error::InvalidParameter(
                    "records over 8 bytes are served with YPIR+SP, whose shards are not built \
                     yet"
                    .into(),
                ))
            }
            _ => {
                let (server, offline) = pir_lattice::SimplePirServer::build_columns(input, slice)?;
                (Box::new(server), offline)
            }
        };
        let mut lattice = Self::assemble(server, &offline, &database.about);
        lattice.database_id = part_id;
        Ok((lattice, offline))
    }

    /// The backend of `server`, its hint download made of `about` and `offline`'s hint.
    fn assemble(server: Box<dyn SingleServer>, offline: &pir_lattice::Saved, about: &[u8]) -> Self {
        let params = server.header().params;
        let hint = &offline.hint;
        let download = HintDownload {
            scheme: params.scheme,
            about,
            hint,
        }
        .to_bytes();
        Self {
            header_message: server.header().encode(),
            database_id: server.header().version,
            server,
            download: Bytes::from(download),
            query_bytes: wire::HEADER_LEN + pir_lattice::wire::query_body_bytes(&params),
        }
    }

    /// Puts the backend behind the signed-batch service, signing with `key`.
    pub fn serve(self, key: SecretKey) -> LatticeService {
        SignedService::new(self, key)
    }

    /// The hint header: shape, seeds and database version.
    pub fn header(&self) -> &HintHeader {
        self.server.header()
    }

    /// The hint download (what `GET /pir/v1/hint` returns).
    pub fn download(&self) -> &[u8] {
        &self.download
    }

    /// Bytes of one query message for this database.
    pub fn query_bytes(&self) -> usize {
        self.query_bytes
    }

    /// Bytes the packed database occupies in memory.
    pub fn memory_bytes(&self) -> usize {
        self.server.memory_bytes()
    }

    /// How long and how many bytes of clients' uploaded one-time keys the server keeps
    /// (YPIR and YPIR+SP; [`pir_lattice::KeyPolicy::default`] until set).
    pub fn set_key_policy(&self, policy: pir_lattice::KeyPolicy) -> Result<(), Error> {
        self.server.set_key_policy(policy)
    }

    fn scheme_id(&self) -> SchemeId {
        self.header().params.scheme.id()
    }
}

impl Backend for Lattice {
    /// The query message, decoded by the scheme inside the batch pass.
    type Prepared = Vec<u8>;

    fn accepts(&self, scheme: SchemeId) -> bool {
        scheme == self.scheme_id() && Self::SCHEMES.contains(&scheme)
    }
    fn database_id(&self) -> &[u8; 32] {
        &self.database_id
    }
    fn stale_message(&self) -> String {
        STALE.into()
    }
    fn max_queries(&self) -> usize {
        MAX_QUERIES_PER_REQUEST
    }
    fn max_query_body(&self) -> usize {
        self.query_bytes
    }
    fn description(&self) -> &[u8] {
        &self.header_message
    }
    fn prepare(&self, _scheme: SchemeId, query: &[u8]) -> Result<Vec<u8>, Refusal> {
        // The scheme's decoder checks the exact length (YPIR has two: keys inline or by id).
        if query.len() > self.query_bytes {
            return Err(Refusal::bad_request(format!(
                "a query for this database is at most {} bytes, not {}",
                self.query_bytes,
                query.len()
            )));
        }
        Ok(query.to_vec())
    }
    fn answer_batch(&self, prepared: Vec<Vec<u8>>) -> Vec<Result<Vec<u8>, Refusal>> {
        let queries: Vec<&[u8]> = prepared.iter().map(Vec::as_slice).collect();
        self.server
            .answer_batch(&queries)
            .into_iter()
            .map(|answer| answer.map_err(Refusal::from))
            .collect()
    }
    fn health(&self) -> String {
        let header = self.header();
        let p = &header.params;
        format!(
            "ok scheme={} version={} records={} record_bits={} matrix={}x{}\n",
            self.scheme_id().name(),
            hex::encode(header.version),
            p.records,
            p.record_bits,
            p.rows,
            p.columns
        )
    }
    fn hint(&self) -> Option<Bytes> {
        Some(self.download.clone())
    }
}

/// Largest hint download a client accepts: the lattice limit plus room for the envelope and
/// `about`.
pub const MAX_DOWNLOAD: usize = pir_lattice::wire::MAX_HINT_BODY + (1 << 17);

/// A hint download: `envelope(scheme, Manifest, about_len u32 | about | hint)`, borrowed
/// from the bytes it was read from (layout in the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintDownload<'a> {
    /// The lattice scheme (the envelope's).
    pub scheme: Scheme,
    /// What the application says about the records, at most [`MAX_ABOUT_BYTES`].
    pub about: &'a [u8],
    /// The `pir_lattice::wire` hint message.
    pub hint: &'a [u8],
}

impl<'a> Codec<'a> for HintDownload<'a> {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        let mut body = Writer::with_capacity(4 + self.about.len() + self.hint.len());
        // `LatticeService::build` keeps `about` under MAX_ABOUT_BYTES.
        body.u32(u32::try_from(self.about.len()).unwrap_or(u32::MAX));
        body.bytes(self.about);
        body.bytes(self.hint);
        wire::Envelope {
            scheme: self.scheme.id(),
            kind: MessageKind::Manifest,
            body: &body.into_bytes(),
        }
        .encode(w);
    }

    fn decode(r: &mut Reader<'a>, _: &()) -> Result<Self, Error> {
        let envelope = wire::Envelope::decode(r, &MAX_DOWNLOAD)?;
        let scheme = Scheme::from_id(envelope.scheme)?;
        if envelope.kind != MessageKind::Manifest {
            return Err(Error::WrongKind {
                found: envelope.kind as u8,
                expected: MessageKind::Manifest as u8,
            });
        }
        let mut body = Reader::new(envelope.body);
        let len = body.u32()? as usize;
        if len > MAX_ABOUT_BYTES {
            return Err(Error::Oversized {
                len,
                limit: MAX_ABOUT_BYTES,
            });
        }
        let about = body.take(len)?;
        let hint = body.take(body.remaining())?;
        Ok(Self {
            scheme,
            about,
            hint,
        })
    }
}

/// Splits a hint download into the scheme, `about` and the hint message; untrusted bytes
/// ([`HintDownload`]).
pub fn parse_download(bytes: &[u8]) -> Result<(Scheme, &[u8], &[u8]), Error> {
    let download = HintDownload::from_bytes(bytes, &())?;
    Ok((download.scheme, download.about, download.hint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_lattice::SimplePirClient;
    use rand::SeedableRng;

    use crate::{Handler, Reply};
    use pir_core::protocol;
    use pir_core::wire::ErrorCode;

    fn service(scheme: Scheme) -> (LatticeService, Vec<u8>, SecretKey) {
        let records: Vec<u8> = (0..64u32 * 40).map(|i| (i * 7 + 3) as u8).collect();
        let key = SecretKey::generate().unwrap();
        let copy = SecretKey::from_pkcs8(key.pkcs8()).unwrap();
        let database = LatticeDatabase {
            scheme,
            records: &records,
            record_count: 64,
            record_bytes: 40,
            seeds: [[1; 16], [2; 16]],
            version: [9; 32],
            about: b"about".to_vec(),
        };
        let service = Lattice::new(database, &mut |_, _| {}).unwrap().serve(copy);
        (service, records, key)
    }

    fn hint_of(service: &LatticeService) -> Vec<u8> {
        let (_, about, hint) = parse_download(service.backend().download()).unwrap();
        assert_eq!(about, b"about");
        hint.to_vec()
    }

    #[test]
    fn downloads_are_parsed_and_checked() {
        let mut body = 3u32.to_le_bytes().to_vec();
        body.extend_from_slice(b"abcHINT");
        let bytes = wire::encode_envelope(SchemeId::DoublePir, MessageKind::Manifest, &body);
        let (scheme, about, hint) = parse_download(&bytes).unwrap();
        assert_eq!(
            (scheme, about, hint),
            (Scheme::DoublePir, &b"abc"[..], &b"HINT"[..])
        );
        let chor = wire::encode_envelope(SchemeId::Chor, MessageKind::Manifest, &body);
        assert!(parse_download(&chor).is_err());
        let mut long = 99u32.to_le_bytes().to_vec();
        long.extend_from_slice(b"abc");
        let truncated = wire::encode_envelope(SchemeId::SimplePir, MessageKind::Manifest, &long);
        assert!(parse_download(&truncated).is_err());
    }

    fn request(version: &[u8; 32], queries: &[Vec<u8>]) -> Vec<u8> {
        let body = protocol::encode_query_batch(version, queries);
        wire::encode_envelope(SchemeId::SimplePir, MessageKind::Query, &body)
    }

    #[test]
    fn batched_requests_are_answered_signed_and_decodable() {
        let (service, records, key) = service(Scheme::SimplePir);
        let client = SimplePirClient::new(&hint_of(&service)).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let mut states = Vec::new();
        let mut requests = Vec::new();
        for index in [0u64, 17, 63] {
            let (state, q1) = client.query(index, &mut rng).unwrap();
            let (_, q2) = client.query(1, &mut rng).unwrap();
            states.push((index, state));
            requests.push(request(&[9; 32], &[q1, q2]));
        }
        requests.insert(1, b"PIRw nonsense".to_vec());
        let refs: Vec<&[u8]> = requests.iter().map(Vec::as_slice).collect();
        let replies = service.handle_many(&refs);
        assert_eq!(replies[1].status, 400);
        let good: Vec<&Reply> = replies.iter().filter(|r| r.status == 200).collect();
        assert_eq!(good.len(), 3);
        let sizes: std::collections::BTreeSet<usize> = good.iter().map(|r| r.body.len()).collect();
        assert_eq!(sizes.len(), 1, "reply size does not depend on the index");
        let good_requests = [&requests[0], &requests[2], &requests[3]];
        for ((reply, request), (index, state)) in good.iter().zip(good_requests).zip(&states) {
            let envelope = wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
            let batch = protocol::decode_answer_batch(envelope.body, 1 << 20).unwrap();
            let statement = pir_keys::answer_statement(&[9; 32], request, batch.payload);
            key.public().verify(&statement, &batch.signature).unwrap();
            let record = client.decode(state, batch.answers[0]).unwrap();
            let i = *index as usize;
            assert_eq!(record, &records[i * 40..(i + 1) * 40]);
        }
        assert_eq!(service.metrics().queries(), 6);
    }

    /// YPIR's one-time keys: the first request uploads them, later ones name them (smaller
    /// requests, same-size replies); a server that does not hold them refuses with
    /// `UnknownKey`, and an upload to it is answered.
    #[test]
    fn uploaded_keys_are_named_later_and_unknown_ones_are_refused_with_their_own_code() {
        let (fresh, _, _) = service(Scheme::YpirSp);
        let (service, records, _) = service(Scheme::YpirSp);
        let client = pir_lattice::open_client(Scheme::YpirSp, &hint_of(&service)).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(6);
        let ask = |service: &LatticeService, index: u64, rng: &mut rand_chacha::ChaCha20Rng| {
            let (state, query) = client.query(index, rng).unwrap();
            let mut bytes = request(&[9; 32], &[query]);
            bytes[6] = SchemeId::YpirSp as u8;
            let reply = service.handle_many(&[&bytes]).remove(0);
            (state, bytes.len(), reply)
        };
        let (_, upload_len, first) = ask(&service, 3, &mut rng);
        let (state, later_len, later) = ask(&service, 60, &mut rng);
        assert_eq!((first.status, later.status), (200, 200));
        assert_eq!(upload_len - later_len, client.key_bytes());
        assert_eq!(first.body.len(), later.body.len(), "replies the same size");
        let envelope = wire::decode_envelope(&later.body, later.body.len()).unwrap();
        let batch = protocol::decode_answer_batch(envelope.body, 1 << 20).unwrap();
        let record = client.decode(&state, batch.answers[0]).unwrap();
        assert_eq!(record, &records[60 * 40..61 * 40]);
        let (_, _, refused) = ask(&fresh, 5, &mut rng);
        assert_eq!(refused.status, 400);
        let envelope = wire::decode_envelope(&refused.body, refused.body.len()).unwrap();
        let (code, message) = wire::decode_error(envelope.body).unwrap();
        assert_eq!(code, ErrorCode::UnknownKey as u16, "{message}");
        assert!(message.contains("upload them again"), "{message}");
        client.keys_lost();
        let (_, again_len, again) = ask(&fresh, 5, &mut rng);
        assert_eq!((again.status, again_len), (200, upload_len));
        // A budget smaller than one upload refuses uploads, with words that say why.
        fresh
            .backend()
            .set_key_policy(pir_lattice::KeyPolicy {
                budget_bytes: 0,
                ..pir_lattice::KeyPolicy::default()
            })
            .unwrap();
        client.keys_lost();
        let (_, _, over) = ask(&fresh, 5, &mut rng);
        let envelope = wire::decode_envelope(&over.body, over.body.len()).unwrap();
        let (code, message) = wire::decode_error(envelope.body).unwrap();
        assert_eq!(code, ErrorCode::BadRequest as u16);
        assert!(message.contains("key budget"), "{message}");
    }

    #[test]
    fn refusals_are_error_envelopes_and_the_service_keeps_answering() {
        let (service, _, _) = service(Scheme::DoublePir);
        let header = service.handle_many(&[&wire::encode_envelope(
            SchemeId::Control,
            MessageKind::ManifestRequest,
            &[],
        )]);
        let (h, matrix) =
            pir_lattice::wire::decode_hint(&header[0].body, Scheme::DoublePir).unwrap();
        assert_eq!((h.version, matrix), ([9; 32], None));
        let stale = request(&[8; 32], &[vec![1, 2, 3]]);
        let double = |body: &[u8]| {
            let mut bytes = body.to_vec();
            bytes[6] = SchemeId::DoublePir as u8;
            bytes
        };
        let cases = [
            (double(&stale), ErrorCode::WrongDatabase),
            (
                request(&[9; 32], &[vec![1, 2, 3]]),
                ErrorCode::UnsupportedScheme,
            ),
            (
                double(&request(&[9; 32], &[vec![1, 2, 3]])),
                ErrorCode::BadRequest,
            ),
            (b"garbage".to_vec(), ErrorCode::BadRequest),
        ];
        for (bytes, code) in &cases {
            let reply = &service.handle_many(&[bytes])[0];
            assert_eq!(reply.status, 400);
            let envelope = wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
            assert_eq!(wire::decode_error(envelope.body).unwrap().0, *code as u16);
        }
        assert_eq!(service.metrics().errors(), cases.len() as u64);
        assert!(Handler::health(&service).contains("scheme=doublepir"));
    }
}
