//! The shape of an n-server PIR scheme.
//!
//! A client turns one or more block indices into one query per server ([`MultiServerScheme::query`]),
//! each server answers from its copy of the database ([`MultiServerScheme::answer`]) and the
//! client decodes all answers into the blocks ([`MultiServerScheme::decode`]). Every scheme also
//! encodes its queries and answers to bytes; those bodies travel inside the [`crate::wire`]
//! envelope. Adding a scheme means implementing this trait, giving it a [`SchemeId`], and
//! registering it in `pir-service`'s registry (`pir_service::registry`), whose conformance
//! harness then runs it.

use rand::CryptoRng;

use crate::{Database, DbShape, Error};

/// Identifies a scheme on the wire (one byte of every envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum SchemeId {
    /// Messages that belong to no scheme: errors, manifest fetches.
    Control = 0,
    /// Chor et al. k-server XOR PIR (upPIR, Cappos 2013).
    Chor = 1,
    /// RAID-PIR (Günther 2019, section 3.2).
    RaidPir = 2,
    /// SimplePIR (Henzinger et al. 2023), single-server LWE.
    SimplePir = 3,
    /// DoublePIR (Henzinger et al. 2023), SimplePIR with a second layer over the hint.
    DoublePir = 4,
    /// RAID-PIR with query-dependent preprocessing (Günther 2019, section 3.3): server-chosen
    /// seeds, a precomputed queue, the flip chunk online. Private credential checks
    /// (`pir-breach`) run on it.
    Qdp = 5,
    /// Two-server PIR from a distributed point function (Boyle, Gilboa, Ishai 2016): Chor's
    /// selection vector, compressed to a key of `O(log B)` bytes per server.
    Dpf = 6,
    /// Not PIR: the slot-store protocol of oblivious storage (`pir oram store`, Stefanov and Shi 2013).
    /// Its stores are dumb and untrusted; the ORAM client hides the access pattern.
    OramStore = 7,
    /// YPIR (Menon and Wu 2024): single-server lattice PIR with the second layer
    /// packed into RLWE ciphertexts, no hint download.
    Ypir = 8,
    /// YPIR+SP (Menon and Wu 2024, section 4.3): SimplePIR's single layer over RLWE with its
    /// answer packed the way YPIR packs, for large records; no hint download.
    YpirSp = 9,
    /// Checklist (Kogan and Corrigan-Gibbs 2021): two-server offline/online PIR with
    /// puncturable pseudorandom sets; an offline server hands out hints and refreshes, an
    /// online server answers lookups in `O(sqrt B)`.
    Checklist = 10,
    /// SinglePass (Lazzaretti and Papamanthou 2024): two-server offline/online PIR whose
    /// hints are made in one pass over the database from per-row permutations; lookups read
    /// one record per row on each server; an update costs one XOR per changed record.
    SinglePass = 11,
    /// InsPIRe (Mahdavi, Patel, Seo and Yeo 2025): one RLWE layer with its answer packed by
    /// InspiRING (two key-switching keys, the packing's mask work offline); no hint download.
    Inspire = 12,
    /// Reserved for a scheme under development (and the toy scheme of the service tests):
    /// no release build registers it, so every server refuses it until it gets an id of its
    /// own.
    Experimental = 254,
}

impl SchemeId {
    /// Parses the scheme byte of an envelope.
    pub fn from_byte(byte: u8) -> Result<Self, Error> {
        match byte {
            0 => Ok(Self::Control),
            1 => Ok(Self::Chor),
            2 => Ok(Self::RaidPir),
            3 => Ok(Self::SimplePir),
            4 => Ok(Self::DoublePir),
            5 => Ok(Self::Qdp),
            6 => Ok(Self::Dpf),
            7 => Ok(Self::OramStore),
            8 => Ok(Self::Ypir),
            9 => Ok(Self::YpirSp),
            10 => Ok(Self::Checklist),
            11 => Ok(Self::SinglePass),
            12 => Ok(Self::Inspire),
            254 => Ok(Self::Experimental),
            other => Err(Error::WrongScheme {
                found: other,
                expected: 2,
            }),
        }
    }

    /// A human name for messages and logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Control => "control",
            Self::Chor => "chor",
            Self::RaidPir => "raid-pir",
            Self::SimplePir => "simplepir",
            Self::DoublePir => "doublepir",
            Self::Qdp => "qdp",
            Self::Dpf => "dpf",
            Self::OramStore => "oram-store",
            Self::Ypir => "ypir",
            Self::YpirSp => "ypir-sp",
            Self::Checklist => "checklist",
            Self::SinglePass => "singlepass",
            Self::Inspire => "inspire",
            Self::Experimental => "experimental",
        }
    }
}

/// An n-server PIR scheme over a database of a fixed [`DbShape`].
pub trait MultiServerScheme {
    /// What one server receives.
    type Query;
    /// What one server sends back.
    type Answer;
    /// What the client keeps between [`Self::query`] and [`Self::decode`].
    type ClientState;

    /// The scheme's wire id.
    fn id(&self) -> SchemeId;
    /// The database shape the scheme was built for.
    fn shape(&self) -> DbShape;
    /// `n`, the number of servers one query goes to.
    fn servers(&self) -> usize;
    /// Most blocks one query can retrieve.
    fn max_blocks_per_query(&self) -> usize;
    /// Longest answer body any server sends to one query (a client refuses longer ones
    /// unread).
    fn max_answer_body(&self) -> usize;

    /// Makes one query per server for `indices` (one or more blocks, as the scheme allows).
    fn query(
        &self,
        indices: &[usize],
        rng: &mut impl CryptoRng,
    ) -> Result<(Vec<Self::Query>, Self::ClientState), Error>;
    /// What a server answers to `query` from `db`.
    fn answer(&self, db: &Database, query: &Self::Query) -> Result<Self::Answer, Error>;
    /// Decodes the answers of all servers (in server order) into the blocks, in the order of
    /// the indices given to [`Self::query`].
    fn decode(
        &self,
        state: &Self::ClientState,
        answers: &[Self::Answer],
    ) -> Result<Vec<Vec<u8>>, Error>;

    /// The wire body of a query.
    fn encode_query(&self, query: &Self::Query) -> Vec<u8>;
    /// Parses a query body, checking every length against the parameters.
    fn decode_query(&self, bytes: &[u8]) -> Result<Self::Query, Error>;
    /// The wire body of an answer.
    fn encode_answer(&self, answer: &Self::Answer) -> Vec<u8>;
    /// Parses the answer body of the server that received `query`.
    fn decode_answer(&self, query: &Self::Query, bytes: &[u8]) -> Result<Self::Answer, Error>;
}
