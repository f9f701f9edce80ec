//! The Network Block Device protocol, server side, as a sans-I/O codec.
//!
//! Source: the NBD protocol document (`doc/proto.md` of the NBD project): fixed newstyle
//! negotiation, options `NBD_OPT_GO`/`INFO`/`EXPORT_NAME`/`LIST`/`ABORT`,
//! `NBD_OPT_STRUCTURED_REPLY`, meta contexts (answered with none), then the transmission
//! phase. Every integer on the wire is big-endian (network order). What real clients need:
//! `nbdcopy` and `nbdinfo` (libnbd) negotiate structured replies and `NBD_OPT_GO`; `qemu-img`
//! does the same. With [`Negotiation::require_tls`], every option but `NBD_OPT_STARTTLS` and
//! `NBD_OPT_ABORT` is refused with `NBD_REP_ERR_TLS_REQD` until TLS is up (the spec's "forced
//! TLS"), so nothing about the export, let alone a block, reaches a client without the key.
//! The codec moves no bytes; [`export`] runs it on sockets.

pub mod export;
pub mod listen;
pub mod psk;

/// `"NBDMAGIC"`, first in the server greeting.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// `"IHAVEOPT"`: the newstyle magic, also in front of every client option.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of option replies.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of transmission requests.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of simple replies.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
/// Magic of structured replies.
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags: fixed newstyle, and no 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
const FLAG_FIXED_NEWSTYLE: u16 = 1;
const FLAG_NO_ZEROES: u16 = 2;
/// Client flags.
const CLIENT_FIXED_NEWSTYLE: u32 = 1;
const CLIENT_NO_ZEROES: u32 = 2;

/// Options.
pub mod option {
    /// Old-style export selection; moves straight to transmission.
    pub const EXPORT_NAME: u32 = 1;
    /// The client gives up.
    pub const ABORT: u32 = 2;
    /// List exports.
    pub const LIST: u32 = 3;
    /// TLS upgrade (offered when the export has a pre-shared key).
    pub const STARTTLS: u32 = 5;
    /// Export information.
    pub const INFO: u32 = 6;
    /// Export information, then transmission.
    pub const GO: u32 = 7;
    /// Structured replies.
    pub const STRUCTURED_REPLY: u32 = 8;
    /// List metadata contexts.
    pub const LIST_META_CONTEXT: u32 = 9;
    /// Select metadata contexts.
    pub const SET_META_CONTEXT: u32 = 10;
}

const REP_ACK: u32 = 1;
const REP_SERVER: u32 = 2;
const REP_INFO: u32 = 3;
const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
const REP_ERR_INVALID: u32 = (1 << 31) + 3;
/// The option needs TLS first.
const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;
const INFO_EXPORT: u16 = 0;
const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flags.
pub mod flags {
    /// The flags field is valid.
    pub const HAS_FLAGS: u16 = 1;
    /// The server honours `NBD_CMD_FLUSH`.
    pub const SEND_FLUSH: u16 = 1 << 2;
    /// The server honours `NBD_CMD_FLAG_FUA`.
    pub const SEND_FUA: u16 = 1 << 3;
    /// `NBD_CMD_TRIM` is accepted.
    pub const SEND_TRIM: u16 = 1 << 5;
    /// `NBD_CMD_WRITE_ZEROES` is accepted.
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    /// A flush on one connection covers writes completed on every connection.
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
}

/// Commands.
pub mod command {
    /// Read.
    pub const READ: u16 = 0;
    /// Write.
    pub const WRITE: u16 = 1;
    /// Disconnect.
    pub const DISC: u16 = 2;
    /// Flush.
    pub const FLUSH: u16 = 3;
    /// Trim (a hint).
    pub const TRIM: u16 = 4;
    /// Cache (a hint).
    pub const CACHE: u16 = 5;
    /// Write zeroes.
    pub const WRITE_ZEROES: u16 = 6;
    /// Forced unit access: durable before the reply.
    pub const FLAG_FUA: u16 = 1;
}

/// Error numbers (NBD uses these values on every platform).
pub mod errno {
    /// I/O error.
    pub const EIO: u32 = 5;
    /// Invalid argument.
    pub const EINVAL: u32 = 22;
    /// No space (a range past the end).
    pub const ENOSPC: u32 = 28;
    /// Value too large (a request over the maximum payload).
    pub const EOVERFLOW: u32 = 75;
    /// Not supported.
    pub const ENOTSUP: u32 = 95;
    /// The server is shutting down.
    pub const ESHUTDOWN: u32 = 108;
}

/// Largest option payload accepted.
pub const MAX_OPTION: u32 = 64 * 1024;
/// Largest read or write payload (advertised as the maximum block size).
pub const MAX_PAYLOAD: u32 = 32 * 1024 * 1024;

/// The server's first 18 bytes.
pub fn greeting() -> [u8; 18] {
    let mut out = [0u8; 18];
    out[..8].copy_from_slice(&NBD_MAGIC.to_be_bytes());
    out[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    out[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    out
}

/// What a protocol violation is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("NBD client error: {0}")]
pub struct ProtocolError(pub String);

/// The negotiation phase of one connection.
pub struct Negotiation {
    /// Export size in bytes.
    pub size: u64,
    /// Preferred block size.
    pub block_size: u32,
    /// Structured replies were negotiated.
    pub structured: bool,
    no_zeroes: bool,
    /// The export refuses everything but STARTTLS until TLS is up.
    tls_required: bool,
    /// TLS is up (STARTTLS done).
    tls_active: bool,
}

/// What to do after an option.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Send the bytes and read the next option.
    Reply(Vec<u8>),
    /// Send the bytes and start the transmission phase.
    Transmit(Vec<u8>),
    /// Send the bytes and close.
    Close(Vec<u8>),
    /// Send the bytes, run the TLS handshake, call [`Negotiation::tls_started`] and read the
    /// next option over TLS.
    StartTls(Vec<u8>),
}

fn option_reply(option: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + data.len());
    out.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    out
}

/// The transmission flags this server sends.
pub const TRANSMISSION_FLAGS: u16 = flags::HAS_FLAGS
    | flags::SEND_FLUSH
    | flags::SEND_FUA
    | flags::SEND_TRIM
    | flags::SEND_WRITE_ZEROES
    | flags::CAN_MULTI_CONN;

impl Negotiation {
    /// Starts negotiating from the client's 4 flag bytes.
    pub fn new(
        client_flags: [u8; 4],
        size: u64,
        block_size: u32,
    ) -> Result<Negotiation, ProtocolError> {
        let f = u32::from_be_bytes(client_flags);
        if f & CLIENT_FIXED_NEWSTYLE == 0 {
            return Err(ProtocolError(
                "the client does not speak fixed newstyle NBD".into(),
            ));
        }
        if f & !(CLIENT_FIXED_NEWSTYLE | CLIENT_NO_ZEROES) != 0 {
            return Err(ProtocolError(format!("unknown client flags {f:#x}")));
        }
        Ok(Negotiation {
            size,
            block_size,
            structured: false,
            no_zeroes: f & CLIENT_NO_ZEROES != 0,
            tls_required: false,
            tls_active: false,
        })
    }

    /// Offers `NBD_OPT_STARTTLS` and refuses every other option until it is done.
    pub fn require_tls(&mut self) {
        self.tls_required = true;
    }

    /// Records that the TLS handshake completed. What was negotiated in plaintext is
    /// forgotten, as the spec requires.
    pub fn tls_started(&mut self) {
        self.tls_active = true;
        self.structured = false;
    }

    /// Parses a 16-byte option header: (option, payload length).
    pub fn header(bytes: [u8; 16]) -> Result<(u32, u32), ProtocolError> {
        let magic = u64::from_be_bytes([
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
        ]);
        if magic != IHAVEOPT {
            return Err(ProtocolError("an option without the IHAVEOPT magic".into()));
        }
        let option = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        let len = u32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
        if len > MAX_OPTION {
            return Err(ProtocolError(format!(
                "an option of {len} bytes (the limit is {MAX_OPTION})"
            )));
        }
        Ok((option, len))
    }

    fn info(&self, option: u32) -> Vec<u8> {
        let mut export = Vec::with_capacity(12);
        export.extend_from_slice(&INFO_EXPORT.to_be_bytes());
        export.extend_from_slice(&self.size.to_be_bytes());
        export.extend_from_slice(&TRANSMISSION_FLAGS.to_be_bytes());
        let mut sizes = Vec::with_capacity(14);
        sizes.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        sizes.extend_from_slice(&1u32.to_be_bytes());
        sizes.extend_from_slice(&self.block_size.to_be_bytes());
        sizes.extend_from_slice(&MAX_PAYLOAD.to_be_bytes());
        let mut out = option_reply(option, REP_INFO, &export);
        out.extend(option_reply(option, REP_INFO, &sizes));
        out.extend(option_reply(option, REP_ACK, &[]));
        out
    }

    /// Handles one option with its payload.
    pub fn option(&mut self, option: u32, data: &[u8]) -> Next {
        let invalid =
            |why: &str| Next::Reply(option_reply(option, REP_ERR_INVALID, why.as_bytes()));
        if self.tls_required && !self.tls_active {
            return match option {
                option::STARTTLS if data.is_empty() => {
                    Next::StartTls(option_reply(option, REP_ACK, &[]))
                }
                option::STARTTLS => invalid("NBD_OPT_STARTTLS takes no data"),
                option::ABORT => Next::Close(option_reply(option, REP_ACK, &[])),
                // EXPORT_NAME has no error reply: the only refusal is to hang up.
                option::EXPORT_NAME => Next::Close(Vec::new()),
                _ => Next::Reply(option_reply(
                    option,
                    REP_ERR_TLS_REQD,
                    b"this export requires TLS with a pre-shared key (nbds://)",
                )),
            };
        }
        match option {
            option::STARTTLS if self.tls_active => invalid("TLS is already up"),
            option::EXPORT_NAME => {
                let mut out = Vec::with_capacity(134);
                out.extend_from_slice(&self.size.to_be_bytes());
                out.extend_from_slice(&TRANSMISSION_FLAGS.to_be_bytes());
                if !self.no_zeroes {
                    out.extend_from_slice(&[0u8; 124]);
                }
                Next::Transmit(out)
            }
            option::ABORT => Next::Close(option_reply(option, REP_ACK, &[])),
            option::LIST => {
                if !data.is_empty() {
                    return invalid("NBD_OPT_LIST takes no data");
                }
                let mut out = option_reply(option, REP_SERVER, &0u32.to_be_bytes());
                out.extend(option_reply(option, REP_ACK, &[]));
                Next::Reply(out)
            }
            option::INFO | option::GO => {
                // u32 name length, name, u16 request count, u16 each.
                let Some(name_len) = data
                    .get(..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
                else {
                    return invalid("a truncated NBD_OPT_GO");
                };
                let Some(count) = data
                    .get(4 + name_len..6 + name_len)
                    .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
                else {
                    return invalid("a truncated NBD_OPT_GO");
                };
                if data.len() != 6 + name_len + 2 * count {
                    return invalid("NBD_OPT_GO of the wrong length");
                }
                let reply = self.info(option);
                if option == option::GO {
                    Next::Transmit(reply)
                } else {
                    Next::Reply(reply)
                }
            }
            option::STRUCTURED_REPLY => {
                if !data.is_empty() {
                    return invalid("NBD_OPT_STRUCTURED_REPLY takes no data");
                }
                self.structured = true;
                Next::Reply(option_reply(option, REP_ACK, &[]))
            }
            option::LIST_META_CONTEXT | option::SET_META_CONTEXT => {
                if !self.structured {
                    return invalid("meta contexts need structured replies first");
                }
                // No metadata contexts are offered: clients treat every byte as data.
                Next::Reply(option_reply(option, REP_ACK, &[]))
            }
            _ => Next::Reply(option_reply(option, REP_ERR_UNSUP, b"not supported by pir")),
        }
    }
}

/// A transmission request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeader {
    /// Command flags.
    pub flags: u16,
    /// Command.
    pub command: u16,
    /// The client's cookie, echoed in the reply.
    pub cookie: u64,
    /// Byte offset.
    pub offset: u64,
    /// Byte length.
    pub length: u32,
}

impl RequestHeader {
    /// Parses the 28 header bytes.
    pub fn parse(b: [u8; 28]) -> Result<RequestHeader, ProtocolError> {
        let magic = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        if magic != REQUEST_MAGIC {
            return Err(ProtocolError(format!("a request with magic {magic:#x}")));
        }
        let header = RequestHeader {
            flags: u16::from_be_bytes([b[4], b[5]]),
            command: u16::from_be_bytes([b[6], b[7]]),
            cookie: u64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
            offset: u64::from_be_bytes([b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23]]),
            length: u32::from_be_bytes([b[24], b[25], b[26], b[27]]),
        };
        Ok(header)
    }

    /// Bytes of payload that follow the header (writes only).
    pub fn payload(&self) -> u32 {
        if self.command == command::WRITE {
            self.length
        } else {
            0
        }
    }
}

/// Encodes replies for one connection.
#[derive(Clone, Copy)]
pub struct Replies {
    /// Structured replies were negotiated.
    pub structured: bool,
}

const REPLY_FLAG_DONE: u16 = 1;
const REPLY_TYPE_NONE: u16 = 0;
const REPLY_TYPE_OFFSET_DATA: u16 = 1;
const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

impl Replies {
    fn structured_header(out: &mut Vec<u8>, kind: u16, cookie: u64, len: u32) {
        out.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
        out.extend_from_slice(&REPLY_FLAG_DONE.to_be_bytes());
        out.extend_from_slice(&kind.to_be_bytes());
        out.extend_from_slice(&cookie.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
    }

    fn simple(error: u32, cookie: u64, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + data.len());
        out.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
        out.extend_from_slice(&error.to_be_bytes());
        out.extend_from_slice(&cookie.to_be_bytes());
        out.extend_from_slice(data);
        out
    }

    /// A successful reply without data.
    pub fn done(&self, cookie: u64) -> Vec<u8> {
        if self.structured {
            let mut out = Vec::with_capacity(20);
            Self::structured_header(&mut out, REPLY_TYPE_NONE, cookie, 0);
            out
        } else {
            Self::simple(0, cookie, &[])
        }
    }

    /// A successful read reply.
    pub fn data(&self, cookie: u64, offset: u64, data: &[u8]) -> Vec<u8> {
        if self.structured {
            let mut out = Vec::with_capacity(28 + data.len());
            Self::structured_header(
                &mut out,
                REPLY_TYPE_OFFSET_DATA,
                cookie,
                8 + data.len() as u32,
            );
            out.extend_from_slice(&offset.to_be_bytes());
            out.extend_from_slice(data);
            out
        } else {
            Self::simple(0, cookie, data)
        }
    }

    /// An error reply, with a message when structured replies allow one.
    pub fn error(&self, cookie: u64, errno: u32, message: &str) -> Vec<u8> {
        if self.structured {
            let message = &message.as_bytes()[..message.len().min(4096)];
            let mut out = Vec::with_capacity(26 + message.len());
            Self::structured_header(&mut out, REPLY_TYPE_ERROR, cookie, 6 + message.len() as u32);
            out.extend_from_slice(&errno.to_be_bytes());
            out.extend_from_slice(&(message.len() as u16).to_be_bytes());
            out.extend_from_slice(message);
            out
        } else {
            Self::simple(errno, cookie, &[])
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn handshake_go_and_replies() {
        let g = greeting();
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert!(Negotiation::new([0, 0, 0, 0], 1, 512).is_err());
        let mut n = Negotiation::new([0, 0, 0, 3], 1 << 20, 4096).unwrap();
        assert!(matches!(
            n.option(option::STRUCTURED_REPLY, &[]),
            Next::Reply(_)
        ));
        assert!(n.structured);
        let mut go = Vec::new();
        go.extend_from_slice(&0u32.to_be_bytes());
        go.extend_from_slice(&1u16.to_be_bytes());
        go.extend_from_slice(&3u16.to_be_bytes());
        let Next::Transmit(reply) = n.option(option::GO, &go) else {
            panic!("GO must start transmission")
        };
        // INFO export, INFO block size, ACK.
        assert_eq!(reply.len(), (20 + 12) + (20 + 14) + 20);
        assert_eq!(&reply[20 + 2..20 + 10], &(1u64 << 20).to_be_bytes());
        // A truncated GO is refused, not a panic.
        assert!(
            matches!(n.option(option::GO, &[0, 0, 0, 9]), Next::Reply(r) if r[12..16] == REP_ERR_INVALID.to_be_bytes())
        );
        assert!(
            matches!(n.option(99, &[]), Next::Reply(r) if r[12..16] == REP_ERR_UNSUP.to_be_bytes())
        );
        let mut header = [0u8; 16];
        header[..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
        header[12..].copy_from_slice(&(MAX_OPTION + 1).to_be_bytes());
        assert!(Negotiation::header(header).is_err());
    }

    #[test]
    fn forced_tls_refuses_every_option_until_starttls() {
        let mut n = Negotiation::new([0, 0, 0, 3], 1 << 20, 4096).unwrap();
        n.require_tls();
        let mut go = Vec::new();
        go.extend_from_slice(&0u32.to_be_bytes());
        go.extend_from_slice(&0u16.to_be_bytes());
        for option in [
            option::GO,
            option::INFO,
            option::LIST,
            option::STRUCTURED_REPLY,
        ] {
            let Next::Reply(r) = n.option(option, &go) else {
                panic!("option {option} must be refused")
            };
            assert_eq!(r[12..16], REP_ERR_TLS_REQD.to_be_bytes());
        }
        assert_eq!(n.option(option::EXPORT_NAME, &[]), Next::Close(Vec::new()));
        assert!(matches!(n.option(option::STARTTLS, &[]), Next::StartTls(_)));
        n.tls_started();
        assert!(matches!(n.option(option::GO, &go), Next::Transmit(_)));
        // Without require_tls, STARTTLS is not offered.
        let mut plain = Negotiation::new([0, 0, 0, 3], 1 << 20, 4096).unwrap();
        assert!(
            matches!(plain.option(option::STARTTLS, &[]), Next::Reply(r) if r[12..16] == REP_ERR_UNSUP.to_be_bytes())
        );
    }

    #[test]
    fn requests_and_reply_shapes() {
        let mut b = [0u8; 28];
        b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[6..8].copy_from_slice(&command::WRITE.to_be_bytes());
        b[8..16].copy_from_slice(&7u64.to_be_bytes());
        b[24..].copy_from_slice(&4096u32.to_be_bytes());
        let h = RequestHeader::parse(b).unwrap();
        assert_eq!(
            (h.command, h.cookie, h.payload()),
            (command::WRITE, 7, 4096)
        );
        b[0] = 0;
        assert!(RequestHeader::parse(b).is_err());
        let r = Replies { structured: true };
        assert_eq!(r.done(1).len(), 20);
        assert_eq!(r.data(1, 0, &[1, 2]).len(), 20 + 8 + 2);
        assert_eq!(r.error(1, errno::EIO, "x").len(), 20 + 6 + 1);
        let s = Replies { structured: false };
        assert_eq!(s.data(1, 0, &[1, 2]).len(), 16 + 2);
    }
}
