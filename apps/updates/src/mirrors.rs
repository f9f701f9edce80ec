//! The signed mirror list (upPIR, Cappos 2013, section 4.1).
//!
//! "The vendor's server is also responsible for providing the manifest and a current list of
//! mirrors": a client learns which mirrors exist, and the Ed25519 key of each, from a list the
//! vendor signs. The key matters twice: every TLS connection to a mirror is pinned to it (the
//! encrypted channel of section 4.3), and mirrors sign their answers with it, so a client can
//! prove to a third party that a mirror misbehaved. Privacy rests on the client's chosen
//! mirrors not colluding, so a forged list (all mirrors run by one attacker) must be refused.
//!
//! A list is also a document that ages: the vendor drops a dead or lying mirror by signing a
//! new list, so a client must not be kept on an old one. Every list carries a version and an
//! expiry; a client refuses a list older than the newest it has used (rollback) or past its
//! expiry (freeze), exactly as it does manifests ([`crate::freshness`]).
//!
//! # Format (version 3, all integers little-endian)
//!
//! | field           | size        | meaning                                                   |
//! |-----------------|-------------|-----------------------------------------------------------|
//! | magic           | 4           | `PIRL`                                                    |
//! | version         | u16         | 3 ([`MIRROR_LIST_FORMAT_VERSION`]); 2 is still read        |
//! | created_unix    | u64         | seconds since 1970 when the vendor signed the list        |
//! | list_version    | u64         | the list's counter: a client refuses a lower one than it has used |
//! | expires_unix    | u64         | seconds since 1970 after which a client refuses the list  |
//! | count           | u16         | mirrors that follow, 1 to [`MAX_MIRRORS`]                 |
//! | per mirror: url | u16 + bytes | `https://host:port`, at most [`MAX_URL_LEN`] bytes        |
//! | per mirror: key | 32          | the mirror's Ed25519 public key                           |
//! | per mirror: flags | u8        | version 3 only: bit 0 a release follows, bit 1 chunks follow; other bits zero |
//! | release id      | 32          | (bit 0) SHA-256 of the signed manifest the mirror serves  |
//! | release version | u64         | (bit 0) that manifest's release counter                   |
//! | chunk count `c` | u16         | (bit 1) 1 to 256: the mirror holds only some of `c` RAID-PIR chunks |
//! | chunks held     | ceil(c / 8) | (bit 1) bit `j` (LSB first) set iff chunk `j` is held; at least one set, tail bits zero |
//! | signature       | 64          | Ed25519 over `"pir-mirror-list-v1"` followed by every preceding byte |
//!
//! A list whose mirrors state neither a release nor chunks is written as version 2 (the same
//! fields without the flags byte), which clients from before version 3 still read. Version 1
//! (no list version, no expiry) is refused with a message saying how to rebuild the list.
//! Decoding checks the signature first, then every count against the remaining bytes, then
//! that every URL is well formed and that no URL or key appears twice (two entries for one
//! mirror would let it answer two of a client's "independent" queries).
//!
//! The release a mirror is listed with lets a client choose the newest release and its
//! mirrors from the list alone, without asking every mirror what it serves; the chunks let it
//! give a chunk-only mirror (`pir mirror serve --chunks`) only the RAID-PIR positions it can
//! answer. Both are the vendor's statements, signed; a mirror that serves something else is
//! found out when it is asked, and used as a last spare.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

use pir_core::codec::{check_count, Codec};
use pir_core::wire::{Prologue, Reader, Writer};
use pir_keys::{PublicKey, SecretKey, PUBLIC_KEY_LEN};

use pir_xor::held::ChunkSet;
use pir_xor::raid::MAX_CHUNKS;

use crate::manifest::{signing_message, split_signature};
use crate::UpdateError;

/// The newest mirror list format version, written when a mirror states its release or chunks.
pub const MIRROR_LIST_FORMAT_VERSION: u16 = 3;

/// The format without per-mirror releases and chunks: still read, and written when no mirror
/// states either (so that older clients keep reading such lists).
pub const MIRROR_LIST_FORMAT_V2: u16 = 2;

/// The first format, without a list version or an expiry: refused, see [`OLD_FORMAT_ADVICE`].
pub const MIRROR_LIST_FORMAT_V1: u16 = 1;

/// What to do with a version 1 list (the vendor's command).
pub const OLD_FORMAT_ADVICE: &str = "it is an old list without a version and an expiry, which \
     clients cannot protect against replay; the vendor must rebuild it: pir mirror-list build \
     --vendor-key VENDOR.key --mirror URL=MIRROR.pub ... --list-version N --valid-hours H \
     --out MIRRORS";

/// First bytes of every mirror list.
pub const MIRROR_LIST_MAGIC: [u8; 4] = *b"PIRL";
/// Prologue of a mirror list (the newest version; [`Codec::decode`] also reads version 2).
pub const MIRROR_LIST: Prologue = Prologue {
    magic: &MIRROR_LIST_MAGIC,
    version: MIRROR_LIST_FORMAT_VERSION,
};

/// Prologue of a version 2 list.
const MIRROR_LIST_V2: Prologue = Prologue {
    magic: &MIRROR_LIST_MAGIC,
    version: MIRROR_LIST_FORMAT_V2,
};

/// Flags bit: a release id and version follow.
const HAS_RELEASE: u8 = 1;
/// Flags bit: a chunk count and the chunks held follow.
const HAS_CHUNKS: u8 = 2;

/// Domain-separation prefix of the signed message (see the manifest's).
pub const MIRROR_LIST_SIGNING_CONTEXT: &[u8] = b"pir-mirror-list-v1";

/// Most mirrors in one list: a client queries a handful (Chor PIR needs one per share), and
/// the bound keeps a hostile list from making a client allocate or connect without limit.
pub const MAX_MIRRORS: usize = 64;

/// Longest mirror URL, in bytes.
pub const MAX_URL_LEN: usize = 2048;

/// Required URL scheme: every mirror connection is TLS (section 4.3's encrypted channel).
const HTTPS: &str = "https://";

/// Smallest encoding of one version 2 entry: `https://a:1` with its length, plus a key (a
/// version 3 entry has a flags byte more).
const MIN_ENTRY_LEN: usize = 2 + HTTPS.len() + 3 + PUBLIC_KEY_LEN;

/// One mirror: where it answers and the key its TLS handshakes and answers are signed with;
/// optionally the release it serves and the chunks it holds (format 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorEntry {
    /// `https://host:port`.
    pub url: String,
    /// The mirror's Ed25519 public key.
    pub key: PublicKey,
    /// The release the vendor lists it as serving (`None`: ask the mirror).
    pub release: Option<ListedRelease>,
    /// The RAID-PIR chunks it holds (`None`: the whole release, any scheme).
    pub chunks: Option<ChunkSet>,
}

impl MirrorEntry {
    /// A mirror of the whole release that states no release (ask it what it serves).
    pub fn new(url: String, key: PublicKey) -> MirrorEntry {
        MirrorEntry {
            url,
            key,
            release: None,
            chunks: None,
        }
    }

    fn flags(&self) -> u8 {
        u8::from(self.release.is_some()) * HAS_RELEASE
            + u8::from(self.chunks.is_some()) * HAS_CHUNKS
    }
}

/// A release as the mirror list names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListedRelease {
    /// SHA-256 of the signed manifest ([`crate::Manifest::release_id`]).
    pub id: [u8; 32],
    /// The manifest's release counter (newest first when choosing).
    pub version: u64,
}

/// The vendor's list of mirrors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorList {
    /// When the vendor signed the list, in seconds since 1970.
    pub created_unix: u64,
    /// The list's counter; clients refuse a lower one than the newest they have used.
    pub list_version: u64,
    /// When clients stop accepting the list, in seconds since 1970.
    pub expires_unix: u64,
    /// The mirrors.
    pub mirrors: Vec<MirrorEntry>,
}

impl MirrorList {
    /// The bytes of the mirror list file, signed by `vendor`.
    ///
    /// Encoding does not validate; build entries with [`parse_mirror_arg`] and keep to
    /// [`MAX_MIRRORS`], since every decoder validates.
    pub fn encode_signed(&self, vendor: &SecretKey) -> Vec<u8> {
        let mut bytes = Codec::to_bytes(self);
        let signature = vendor.sign(&signing_message(MIRROR_LIST_SIGNING_CONTEXT, &bytes));
        bytes.extend_from_slice(&signature);
        bytes
    }

    /// Checks the vendor's signature, then parses and validates the list.
    pub fn decode_verified(bytes: &[u8], vendor: &PublicKey) -> Result<MirrorList, UpdateError> {
        let (body, signature) = split_signature(bytes, "mirror list")?;
        if vendor
            .verify(
                &signing_message(MIRROR_LIST_SIGNING_CONTEXT, body),
                signature,
            )
            .is_err()
        {
            if !body.starts_with(&MIRROR_LIST_MAGIC) {
                return Err(not_a_list());
            }
            return Err(UpdateError::Signature(format!(
                "the mirror list's signature does not verify under vendor key {}: it was \
                 modified after signing or signed by another vendor; fetch it again and check \
                 that you use this vendor's public key",
                vendor.fingerprint()
            )));
        }
        parse_body(body)
    }

    /// Parses and validates the list without checking its signature (for inspection tools
    /// and fuzzing; clients must use [`MirrorList::decode_verified`]).
    pub fn decode_unverified(bytes: &[u8]) -> Result<MirrorList, UpdateError> {
        let (body, _signature) = split_signature(bytes, "mirror list")?;
        parse_body(body)
    }
}

/// Parses a `URL=PATH/TO/MIRROR.pub` command-line argument and loads the key file.
///
/// URL must be `https://host:port` (an optional trailing `/` is dropped, nothing else may
/// follow); host is an IPv4 address, a bracketed IPv6 address or a DNS name.
pub fn parse_mirror_arg(arg: &str) -> Result<MirrorEntry, UpdateError> {
    let (url, key_path) = arg.split_once('=').ok_or_else(|| {
        UpdateError::Input(format!(
            "mirror {arg:?} should be URL=KEYFILE, for example \
             https://mirror1.example.org:8443=mirror1.pub"
        ))
    })?;
    check_mirror_url(url)
        .map_err(|why| UpdateError::Input(format!("mirror URL {url:?}: {why}")))?;
    if key_path.is_empty() {
        return Err(UpdateError::Input(format!(
            "mirror {url}: no key file after '='; give the mirror's .pub file"
        )));
    }
    let key = PublicKey::load(Path::new(key_path))?;
    Ok(MirrorEntry::new(
        url.strip_suffix('/').unwrap_or(url).to_owned(),
        key,
    ))
}

/// Parses a chunk list `0,1/4` (chunks 0 and 1 of 4): the `--chunks` of a chunk-only mirror
/// and of its mirror list entry.
pub fn parse_chunks(text: &str) -> Result<ChunkSet, UpdateError> {
    let bad = |why: String| {
        UpdateError::Input(format!(
            "chunks {text:?}: {why}; write the chunks held and the chunk count, as in 0,1/4"
        ))
    };
    let (list, count) = text
        .split_once('/')
        .ok_or_else(|| bad("no chunk count after '/'".into()))?;
    let count: usize = count
        .trim()
        .parse()
        .map_err(|_| bad(format!("{count:?} is not a number")))?;
    let chunks = list
        .split(',')
        .map(|j| {
            j.trim()
                .parse::<usize>()
                .map_err(|_| bad(format!("{j:?} is not a chunk number")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ChunkSet::new(count, chunks).map_err(|e| bad(e.to_string()))
}

/// `0,1/4`: the form [`parse_chunks`] reads.
pub fn format_chunks(set: &ChunkSet) -> String {
    let list: Vec<String> = set.chunks.iter().map(usize::to_string).collect();
    format!("{}/{}", list.join(","), set.chunk_count)
}

/// Checks that `url` is `https://host:port` with an optional trailing `/`.
pub fn check_mirror_url(url: &str) -> Result<(), String> {
    if url.len() > MAX_URL_LEN {
        return Err(format!("longer than {MAX_URL_LEN} bytes"));
    }
    let rest = url
        .strip_prefix(HTTPS)
        .ok_or("must start with https:// (mirrors are only reached over TLS)")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if let Some(c) = rest.chars().find(|c| matches!(c, '/' | '?' | '#' | '@')) {
        return Err(format!(
            "must be https://host:port with no path, query or user ({c:?} found)"
        ));
    }
    let port = if let Some(bracketed) = rest.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or("IPv6 address lacks its closing ']'")?;
        host.parse::<Ipv6Addr>()
            .map_err(|_| format!("{host:?} is not an IPv6 address"))?;
        after
            .strip_prefix(':')
            .ok_or("needs a port, as in https://[::1]:8443")?
    } else {
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or("needs a port, as in https://mirror.example.org:8443")?;
        if host.parse::<Ipv4Addr>().is_err() {
            check_dns_name(host)?;
        }
        port
    };
    match port.parse::<u16>() {
        Ok(p) if p != 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => Err(format!("port {port:?} must be a number from 1 to 65535")),
    }
}

/// A DNS name: dot-separated labels of 1 to 63 letters, digits and inner hyphens, at most 253
/// bytes in all.
fn check_dns_name(host: &str) -> Result<(), String> {
    let valid_label = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(valid_label) {
        return Err(format!("{host:?} is not an IP address or a host name"));
    }
    Ok(())
}

fn not_a_list() -> UpdateError {
    UpdateError::Format("this is not a pir mirror list (it does not start with PIRL)".into())
}

fn wire(e: pir_core::Error) -> UpdateError {
    UpdateError::Format(format!("mirror list: {e}"))
}

/// Parses the unsigned body, checking the count against the bytes left before allocating.
fn parse_body(body: &[u8]) -> Result<MirrorList, UpdateError> {
    <MirrorList as Codec>::from_bytes(body, &()).map_err(|e| match e {
        pir_core::Error::WrongVersion {
            found: MIRROR_LIST_FORMAT_V1,
            ..
        } => UpdateError::Format(format!(
            "mirror list: format version {MIRROR_LIST_FORMAT_V1} is refused: {OLD_FORMAT_ADVICE}"
        )),
        pir_core::Error::WrongVersion { found, supported } => UpdateError::Format(format!(
            "mirror list: format version {found} is not supported (this build reads versions \
             {MIRROR_LIST_FORMAT_V2} to {supported}); upgrade pir"
        )),
        pir_core::Error::WrongMagic => not_a_list(),
        pir_core::Error::Malformed(why) => UpdateError::Format(format!("mirror list: {why}")),
        other => wire(other),
    })
}

/// The unsigned mirror list body (the module documentation's table); the signature over it is
/// added by [`MirrorList::encode_signed`]. [`Codec::decode`] checks the count against the bytes
/// left, every URL, and that no URL or key is listed twice ([`pir_core::Error::Malformed`]).
impl Codec<'_> for MirrorList {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        let v3 = self.mirrors.iter().any(|m| m.flags() != 0);
        if v3 {
            MIRROR_LIST.write(w)
        } else {
            MIRROR_LIST_V2.write(w)
        }
        w.u64(self.created_unix);
        w.u64(self.list_version);
        w.u64(self.expires_unix);
        // More than 65535 mirrors is refused by every decoder anyway.
        w.u16(u16::try_from(self.mirrors.len()).unwrap_or(u16::MAX));
        for mirror in &self.mirrors {
            w.short_bytes(mirror.url.as_bytes());
            w.bytes(&mirror.key.0);
            if v3 {
                encode_statements(mirror, w);
            }
        }
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, pir_core::Error> {
        let bad = pir_core::Error::Malformed;
        let v3 = read_prologue(r)?;
        let created_unix = r.u64()?;
        let list_version = r.u64()?;
        let expires_unix = r.u64()?;
        let count = usize::from(r.u16()?);
        if count == 0 {
            return Err(bad(format!("0 mirrors; a list holds 1 to {MAX_MIRRORS}")));
        }
        check_count(
            r,
            "mirrors",
            count,
            MAX_MIRRORS,
            MIN_ENTRY_LEN + usize::from(v3),
        )?;
        let mut mirrors = Vec::with_capacity(count);
        let mut urls = HashSet::with_capacity(count);
        let mut keys = HashSet::with_capacity(count);
        for _ in 0..count {
            let url = std::str::from_utf8(r.short_bytes(MAX_URL_LEN)?)
                .map_err(|_| bad("a mirror URL is not UTF-8".into()))?
                .to_owned();
            check_mirror_url(&url).map_err(|why| bad(format!("mirror URL {url:?}: {why}")))?;
            let key = PublicKey(r.array()?);
            let (release, chunks) = if v3 {
                decode_statements(r)?
            } else {
                (None, None)
            };
            // Host names and IPv6 digits are case-insensitive; a trailing '/' changes nothing.
            if !urls.insert(url.trim_end_matches('/').to_ascii_lowercase()) {
                return Err(bad(format!("mirror {url} is listed twice")));
            }
            if !keys.insert(key) {
                return Err(bad(format!(
                    "key {} is listed for two mirrors",
                    key.fingerprint()
                )));
            }
            mirrors.push(MirrorEntry {
                url,
                key,
                release,
                chunks,
            });
        }
        Ok(MirrorList {
            created_unix,
            list_version,
            expires_unix,
            mirrors,
        })
    }
}

/// Reads the magic and a version this build reads; true for version 3.
fn read_prologue(r: &mut Reader<'_>) -> Result<bool, pir_core::Error> {
    if r.take(MIRROR_LIST_MAGIC.len())? != MIRROR_LIST_MAGIC {
        return Err(pir_core::Error::WrongMagic);
    }
    match r.u16()? {
        MIRROR_LIST_FORMAT_VERSION => Ok(true),
        MIRROR_LIST_FORMAT_V2 => Ok(false),
        found => Err(pir_core::Error::WrongVersion {
            found,
            supported: MIRROR_LIST_FORMAT_VERSION,
        }),
    }
}

/// Writes a version 3 entry's flags and what they announce.
fn encode_statements(mirror: &MirrorEntry, w: &mut Writer) {
    w.u8(mirror.flags());
    if let Some(release) = &mirror.release {
        w.bytes(&release.id);
        w.u64(release.version);
    }
    if let Some(set) = &mirror.chunks {
        let c = set.chunk_count;
        // ChunkSet keeps 1 <= c <= MAX_CHUNKS (256), so c fits a u16.
        w.u16(u16::try_from(c).unwrap_or(u16::MAX));
        let mut bitmap = vec![0u8; c.div_ceil(8)];
        for &j in &set.chunks {
            bitmap[j / 8] |= 1 << (j % 8);
        }
        w.bytes(&bitmap);
    }
}

/// Reads a version 3 entry's flags and what they announce, checking every field.
fn decode_statements(
    r: &mut Reader<'_>,
) -> Result<(Option<ListedRelease>, Option<ChunkSet>), pir_core::Error> {
    let flags = r.u8()?;
    if flags & !(HAS_RELEASE | HAS_CHUNKS) != 0 {
        return Err(pir_core::Error::UnknownValue {
            field: "mirror list entry flags",
            found: u64::from(flags),
        });
    }
    let release = if flags & HAS_RELEASE != 0 {
        Some(ListedRelease {
            id: r.array()?,
            version: r.u64()?,
        })
    } else {
        None
    };
    let chunks = if flags & HAS_CHUNKS != 0 {
        let c = usize::from(r.u16()?);
        if !(1..=MAX_CHUNKS).contains(&c) {
            return Err(pir_core::Error::OutOfRange {
                field: "mirror list chunk count",
                found: c as u64,
                limit: MAX_CHUNKS as u64,
            });
        }
        let bitmap = r.take(c.div_ceil(8))?;
        let held: Vec<usize> = (0..c)
            .filter(|&j| (bitmap[j / 8] >> (j % 8)) & 1 == 1)
            .collect();
        if c % 8 != 0 && bitmap[c / 8] >> (c % 8) != 0 {
            return Err(pir_core::Error::Malformed(format!(
                "chunks held: bits set past chunk count {c}"
            )));
        }
        Some(ChunkSet::new(c, held).map_err(|_| {
            pir_core::Error::Malformed("a mirror is listed as holding no chunk".into())
        })?)
    } else {
        None
    };
    Ok((release, chunks))
}

#[cfg(test)]
#[path = "mirrors_tests.rs"]
mod tests;
