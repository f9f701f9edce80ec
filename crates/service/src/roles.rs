//! What the offline/online backends ([`crate::checklist`], [`crate::singlepass`]) share: the
//! two server roles and the info message each server describes itself with.
//!
//! ```text
//! info = MAGIC | role u8 (0 offline, 1 online) | the scheme's parameters
//!      | database id [32] | about_len u32 | about
//! ```

use pir_core::protocol::RELEASE_ID_LEN;
use pir_core::wire::{self, MessageKind, Reader, Writer};
use pir_core::{Codec, Error, SchemeId};

/// Largest application description carried in the info message.
pub const MAX_ABOUT_BYTES: usize = 64 * 1024;

/// Which half of a deployment a server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Server 0: hints and refreshes.
    Offline,
    /// Server 1: lookups.
    Online,
}

impl Role {
    /// The role of server `position` (0 offline, 1 online).
    pub fn of(position: usize) -> Result<Self, Error> {
        match position {
            0 => Ok(Self::Offline),
            1 => Ok(Self::Online),
            other => Err(Error::InvalidParameter(format!(
                "an offline/online deployment has servers 0 (offline) and 1 (online), not {other}"
            ))),
        }
    }

    /// `offline` or `online`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Offline => "offline",
            Self::Online => "online",
        }
    }
}

/// A scheme's parameters as its info message carries them.
pub trait InfoParams: Sized + Copy + std::fmt::Debug + PartialEq + Eq {
    /// First bytes of the info message.
    const MAGIC: &'static [u8];
    /// The scheme of the description envelope.
    const SCHEME: SchemeId;
    /// Appends the parameters.
    fn write(&self, w: &mut Writer);
    /// Reads and checks them (an error for parameters the scheme refuses).
    fn read(r: &mut Reader<'_>) -> Result<Self, Error>;
    /// Records `B`.
    fn records(&self) -> u64;
    /// Bytes per record `b`.
    fn record_bytes(&self) -> usize;
}

/// What a server says about itself (the info message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info<P> {
    /// Offline or online.
    pub role: Role,
    /// The scheme's parameters.
    pub params: P,
    /// The database every query must name.
    pub database_id: [u8; RELEASE_ID_LEN],
    /// What the application says about the records (opaque here).
    pub about: Vec<u8>,
}

impl<P: InfoParams> Info<P> {
    /// The info bytes ([`Codec::to_bytes`]).
    pub fn encode(&self) -> Vec<u8> {
        Codec::to_bytes(self)
    }

    /// Reads info bytes (untrusted; [`Codec::from_bytes`]).
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        <Self as Codec>::from_bytes(bytes, &())
    }

    /// The reply to a description request: `envelope(scheme, Manifest, info)`.
    pub fn description(&self) -> Vec<u8> {
        wire::encode_envelope(P::SCHEME, MessageKind::Manifest, &self.encode())
    }

    /// The `/health` line of a server of this info (`scheme` names it).
    pub fn health(&self, scheme: &str) -> String {
        format!(
            "ok {scheme} role={} database={} records={} record_bytes={}\n",
            self.role.name(),
            hex::encode(self.database_id),
            self.params.records(),
            self.params.record_bytes()
        )
    }
}

/// Checks that `about` fits the info message.
pub fn check_about(about: &[u8]) -> Result<(), Error> {
    if about.len() > MAX_ABOUT_BYTES {
        return Err(Error::InvalidParameter(format!(
            "the database description is {} bytes; at most {MAX_ABOUT_BYTES}",
            about.len()
        )));
    }
    Ok(())
}

impl<P: InfoParams> Codec<'_> for Info<P> {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.bytes(P::MAGIC);
        w.u8(match self.role {
            Role::Offline => 0,
            Role::Online => 1,
        });
        self.params.write(w);
        w.bytes(&self.database_id);
        // about <= MAX_ABOUT_BYTES (check_about)
        w.u32(self.about.len() as u32);
        w.bytes(&self.about);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        if r.take(P::MAGIC.len())? != P::MAGIC {
            return Err(Error::WrongMagic);
        }
        let role = match r.u8()? {
            0 => Role::Offline,
            1 => Role::Online,
            other => {
                return Err(Error::UnknownValue {
                    field: "server role",
                    found: u64::from(other),
                })
            }
        };
        let params = P::read(r)?;
        let database_id = r.array()?;
        let len = r.u32()? as usize;
        if len > MAX_ABOUT_BYTES {
            return Err(Error::Oversized {
                len,
                limit: MAX_ABOUT_BYTES,
            });
        }
        let about = r.take(len)?.to_vec();
        Ok(Self {
            role,
            params,
            database_id,
            about,
        })
    }
}

/// Reads a server's description reply (`envelope(scheme, Manifest, info)`; untrusted).
pub fn parse_description<P: InfoParams>(bytes: &[u8]) -> Result<Info<P>, Error> {
    let envelope = wire::decode_envelope(bytes, bytes.len())?;
    if envelope.scheme != P::SCHEME || envelope.kind != MessageKind::Manifest {
        return Err(Error::Malformed(format!(
            "expected a {} info message, got a {} {:?} message",
            P::SCHEME.name(),
            envelope.scheme.name(),
            envelope.kind
        )));
    }
    Info::decode(envelope.body)
}
