//! QDP wire bodies (layout in the module documentation of [`crate::qdp`]).

use super::*;

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
pub(super) fn write_params(writer: &mut Writer, tag: u8, raid: &RaidPir, server: usize) {
    writer.u8(tag);
    write_shape_header(writer, raid.shape());
    // n <= 64, r <= n, c <= 256 (RaidPir::new) and server < n (checked by every caller),
    // so these conversions never saturate.
    writer.u16(u16::try_from(raid.servers()).unwrap_or(u16::MAX));
    writer.u16(u16::try_from(raid.redundancy()).unwrap_or(u16::MAX));
    writer.u32(u32::try_from(raid.chunks()).unwrap_or(u32::MAX));
    writer.u16(u16::try_from(server).unwrap_or(u16::MAX));
    writer.u8(raid.mode().to_byte());
}

/// Reads `tag | params`, checks them against `raid`, and returns the server position.
pub(super) fn read_params(
    reader: &mut Reader<'_>,
    tag: u8,
    raid: &RaidPir,
) -> Result<usize, Error> {
    let found = reader.u8()?;
    if found != tag {
        return Err(Error::UnknownValue {
            field: "QDP message tag here",
            found: u64::from(found),
        });
    }
    check_shape_header(reader, raid.shape())?;
    let servers = usize::from(reader.u16()?);
    let redundancy = usize::from(reader.u16()?);
    let chunks = reader.u32()? as usize;
    let server = usize::from(reader.u16()?);
    let mode = AnswerMode::from_byte(reader.u8()?)?;
    if (servers, redundancy, chunks, mode)
        != (
            raid.servers(),
            raid.redundancy(),
            raid.chunks(),
            raid.mode(),
        )
    {
        return Err(Error::Malformed(format!(
            "QDP parameters (n {servers}, r {redundancy}, c {chunks}, mode {mode:?}) differ from \
             this database's (n {}, r {}, c {}, mode {:?})",
            raid.servers(),
            raid.redundancy(),
            raid.chunks(),
            raid.mode()
        )));
    }
    if server >= servers {
        return Err(Error::OutOfRange {
            field: "server position",
            found: server as u64,
            limit: servers as u64,
        });
    }
    Ok(server)
}

/// Decodes a seed request; returns the server position it asks.
pub fn decode_seed_request(raid: &RaidPir, body: &[u8]) -> Result<usize, Error> {
    let mut reader = Reader::new(body);
    let server = read_params(&mut reader, TAG_SEED_REQUEST, raid)?;
    reader.finish()?;
    Ok(server)
}

/// Encodes a seed response (`grant.server` must be a position of `raid`).
pub fn encode_seed_response(raid: &RaidPir, grant: &SeedGrant) -> Vec<u8> {
    let mut writer = Writer::with_capacity(SEED_RESPONSE_LEN);
    write_params(&mut writer, TAG_SEED_RESPONSE, raid, grant.server);
    writer.u64(grant.id);
    writer.bytes(&grant.seed);
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
    write_params(&mut writer, TAG_QUERY, raid, query.server);
    writer.u64(query.seed_id);
    for flip in &query.flips {
        writer.bytes(flip.as_bytes());
    }
    writer.into_bytes()
}

/// Decodes a query body: size limit first, then header, then exact flip-chunk lengths (tail
/// bits must be zero), allocating only after the length is known to be right.
pub fn decode_query(raid: &RaidPir, body: &[u8]) -> Result<QdpQuery, Error> {
    let limit = max_query_body(raid);
    if body.len() > limit {
        return Err(Error::Oversized {
            len: body.len(),
            limit,
        });
    }
    let mut reader = Reader::new(body);
    let server = read_params(&mut reader, TAG_QUERY, raid)?;
    let seed_id = reader.u64()?;
    let flips = raid.read_flips(server, &mut reader)?;
    reader.finish()?;
    Ok(QdpQuery {
        server,
        seed_id,
        flips,
    })
}
