//! The info body of a `pir breach` server: what it tells clients about itself (database shape,
//! its position, RAID-PIR parameters, whether it blinds, the application's database header).
//! One codec for the server that writes it and the client that reads it (untrusted bytes).

use pir_core::wire::{Prologue, Reader, Writer};
use pir_core::Error;

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
        let mut w = Writer::with_capacity(32 + self.header.len());
        INFO.write(&mut w);
        w.u64(self.block_count);
        w.u32(u32::try_from(self.block_size).map_err(|_| field("block size"))?);
        w.u16(u16::try_from(self.server).map_err(|_| field("server position"))?);
        w.u16(u16::try_from(self.servers).map_err(|_| field("server count"))?);
        w.u16(u16::try_from(self.redundancy).map_err(|_| field("redundancy"))?);
        w.u32(u32::try_from(self.chunks).map_err(|_| field("chunk count"))?);
        w.u8(u8::from(self.blinding));
        w.u16(self.header.len() as u16);
        w.bytes(&self.header);
        Ok(w.into_bytes())
    }

    /// Decodes an info body (without its signature); untrusted bytes.
    pub fn decode(body: &[u8]) -> Result<Info, Error> {
        let mut r = Reader::new(body);
        INFO.read(&mut r)?;
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
        let len = usize::from(r.u16()?);
        if len > MAX_HEADER_BYTES {
            return Err(Error::Oversized {
                len,
                limit: MAX_HEADER_BYTES,
            });
        }
        let header = r.take(len)?.to_vec();
        r.finish()?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
