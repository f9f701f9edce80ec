//! QDP wire bodies (layout in the module documentation of [`crate::qdp`]), each a
//! [`Codec`] whose context is the RAID-PIR parameters the server holds (or the client uses):
//! a body naming other parameters is refused.

use super::*;
use crate::raid::RaidParams;

/// All-zero flip chunks of `server` (so a selection holds only the seeded sub-queries).
pub(super) fn zero_flips(raid: &RaidPir, server: usize) -> Vec<BitVec> {
    raid.flip_chunks(server)
        .map(|chunk| BitVec::zeros(raid.chunk_len(chunk)))
        .collect()
}

/// Checks a query's position and flip-chunk lengths against the parameters.
pub(super) fn check_flips(raid: &RaidPir, query: &QdpQuery) -> Result<(), Error> {
    raid.check_flips(query.server, &query.flips)
}

/// Writes `tag | params`.
fn write_params(writer: &mut Writer, tag: u8, raid: &RaidPir, server: usize) {
    writer.u8(tag);
    RaidParams {
        scheme: *raid,
        server,
    }
    .encode(writer);
}

/// Reads `tag | params`, checks them against `raid`, and returns the server position.
fn read_params(reader: &mut Reader<'_>, tag: u8, raid: &RaidPir) -> Result<usize, Error> {
    let found = reader.u8()?;
    if found != tag {
        return Err(Error::UnknownValue {
            field: "QDP message tag here",
            found: u64::from(found),
        });
    }
    let params = RaidParams::decode(reader, &raid.shape())?;
    raid.check_same(&params.scheme)?;
    Ok(params.server)
}

/// Step 1: `0x01 | params`, a client asks server `server` for a seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedRequest {
    /// The parameters.
    pub raid: RaidPir,
    /// The position asked.
    pub server: usize,
}

impl Codec<'_> for SeedRequest {
    type Context = RaidPir;

    fn encode(&self, w: &mut Writer) {
        write_params(w, TAG_SEED_REQUEST, &self.raid, self.server);
    }

    fn decode(r: &mut Reader<'_>, raid: &RaidPir) -> Result<Self, Error> {
        let server = read_params(r, TAG_SEED_REQUEST, raid)?;
        Ok(Self {
            raid: *raid,
            server,
        })
    }
}

/// Step 2: `0x02 | params | seed id u64 | seed 16`, the server's grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedResponse {
    /// The parameters.
    pub raid: RaidPir,
    /// The grant (its `server` is the position the body names).
    pub grant: SeedGrant,
}

impl Codec<'_> for SeedResponse {
    type Context = RaidPir;

    fn encode(&self, w: &mut Writer) {
        write_params(w, TAG_SEED_RESPONSE, &self.raid, self.grant.server);
        w.u64(self.grant.id);
        w.bytes(&self.grant.seed);
    }

    fn decode(r: &mut Reader<'_>, raid: &RaidPir) -> Result<Self, Error> {
        let server = read_params(r, TAG_SEED_RESPONSE, raid)?;
        let id = r.u64()?;
        let seed = r.array()?;
        Ok(Self {
            raid: *raid,
            grant: SeedGrant { server, id, seed },
        })
    }
}

/// Step 3: `0x03 | params | seed id u64 | flip chunks of this server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdpQueryBody {
    /// The parameters.
    pub raid: RaidPir,
    /// The query (its `server` is the position the body names).
    pub query: QdpQuery,
}

impl Codec<'_> for QdpQueryBody {
    type Context = RaidPir;

    fn encode(&self, w: &mut Writer) {
        write_params(w, TAG_QUERY, &self.raid, self.query.server);
        w.u64(self.query.seed_id);
        for flip in &self.query.flips {
            w.bytes(flip.as_bytes());
        }
    }

    /// Header first, then the exact flip-chunk lengths (tail bits must be zero), allocating
    /// only after the length is known to be there.
    fn decode(r: &mut Reader<'_>, raid: &RaidPir) -> Result<Self, Error> {
        let server = read_params(r, TAG_QUERY, raid)?;
        let seed_id = r.u64()?;
        let flips = raid.read_flips(server, r)?;
        Ok(Self {
            raid: *raid,
            query: QdpQuery {
                server,
                seed_id,
                flips,
            },
        })
    }
}

/// Encodes a seed request (`server` must be a position of `raid`).
pub(super) fn encode_seed_request(raid: &RaidPir, server: usize) -> Vec<u8> {
    let mut writer = Writer::with_capacity(SEED_REQUEST_LEN);
    SeedRequest {
        raid: *raid,
        server,
    }
    .encode(&mut writer);
    writer.into_bytes()
}

/// Decodes a seed request; returns the server position it asks.
pub fn decode_seed_request(raid: &RaidPir, body: &[u8]) -> Result<usize, Error> {
    SeedRequest::from_bytes(body, raid).map(|request| request.server)
}

/// Encodes a seed response (`grant.server` must be a position of `raid`).
pub fn encode_seed_response(raid: &RaidPir, grant: &SeedGrant) -> Vec<u8> {
    let mut writer = Writer::with_capacity(SEED_RESPONSE_LEN);
    SeedResponse {
        raid: *raid,
        grant: grant.clone(),
    }
    .encode(&mut writer);
    writer.into_bytes()
}

/// Exact length of the query body for server `server`.
pub fn query_body_len(raid: &RaidPir, server: usize) -> usize {
    QUERY_HEADER_LEN
        + raid
            .flip_chunks(server)
            .map(|chunk| bits::byte_len(raid.chunk_len(chunk)))
            .sum::<usize>()
}

/// Upper bound on any QDP query body for `raid`'s database shape.
pub fn max_query_body(raid: &RaidPir) -> usize {
    RaidPir::max_query_body(raid.shape()) - raid::QUERY_HEADER_LEN + QUERY_HEADER_LEN
}

/// Encodes a query body (`query.server` must be a position of `raid`).
pub fn encode_query(raid: &RaidPir, query: &QdpQuery) -> Vec<u8> {
    let mut writer = Writer::with_capacity(query_body_len(raid, query.server));
    QdpQueryBody {
        raid: *raid,
        query: query.clone(),
    }
    .encode(&mut writer);
    writer.into_bytes()
}

/// Decodes a query body: size limit first, then [`QdpQueryBody`].
pub fn decode_query(raid: &RaidPir, body: &[u8]) -> Result<QdpQuery, Error> {
    let limit = max_query_body(raid);
    if body.len() > limit {
        return Err(Error::Oversized {
            len: body.len(),
            limit,
        });
    }
    QdpQueryBody::from_bytes(body, raid).map(|body| body.query)
}
