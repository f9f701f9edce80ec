//! apt's method protocol, sans I/O: how `apt` talks to the `pir` method it runs for `pir://`
//! URIs (the program `pir apt install-method` installs).
//!
//! Messages are a status line (`600 URI Acquire`), `Field: value` lines and a blank line, on
//! the method's standard input and output. apt sends `601 Configuration` (we ask for it with
//! `Send-Config: true`) and one `600 URI Acquire` per file; the method answers each with
//! `200 URI Start` and `201 URI Done` (file name, size, hashes) or `400 URI Failure` (a
//! message). In `pir://updates/dists/bookworm/InRelease` the host names no server (the mirrors
//! come from the signed mirror list); the path is the file's name in the release.

use std::collections::BTreeMap;

/// Longest message accepted from apt (a `601 Configuration` carries all of apt's settings).
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// One message: the status code, its words, and the fields in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The status code (`600`).
    pub code: u16,
    /// The words after it (`URI Acquire`).
    pub status: String,
    /// `(name, value)` in order; names may repeat (`Config-Item`).
    pub fields: Vec<(String, String)>,
}

impl Message {
    /// A message with no fields yet.
    pub fn new(code: u16, status: &str) -> Self {
        Self {
            code,
            status: status.to_string(),
            fields: Vec::new(),
        }
    }

    /// Adds a field (values never contain a newline: they are cut at one).
    pub fn field(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        let value = value.to_string();
        let value = value.lines().next().unwrap_or("").to_string();
        self.fields.push((name.to_string(), value));
        self
    }

    /// The first value of field `name` (names compare without case, as apt's do).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The text apt reads: status line, fields, blank line.
    pub fn encode(&self) -> String {
        let mut text = format!("{} {}\n", self.code, self.status);
        for (name, value) in &self.fields {
            text.push_str(name);
            text.push_str(": ");
            text.push_str(value);
            text.push('\n');
        }
        text.push('\n');
        text
    }
}

/// Parses one message from its lines (without the blank line that ends it).
pub fn parse(lines: &[String]) -> Result<Message, String> {
    let (first, rest) = lines
        .split_first()
        .ok_or_else(|| "an empty message".to_string())?;
    let (code, status) = first.split_once(' ').unwrap_or((first.as_str(), ""));
    let code: u16 = code
        .parse()
        .ok()
        .filter(|c| (100..1000).contains(c))
        .ok_or_else(|| format!("the status line {first:?} does not start with a 3-digit code"))?;
    let mut fields = Vec::with_capacity(rest.len());
    for line in rest {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("the line {line:?} is not `Field: value`"))?;
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("the line {line:?} has no field name"));
        }
        fields.push((name.to_string(), value.trim().to_string()));
    }
    Ok(Message {
        code,
        status: status.trim().to_string(),
        fields,
    })
}

/// What the method learns from `601 Configuration`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Every `Config-Item: key=value`, by key (the last one wins).
    pub items: BTreeMap<String, String>,
}

impl Config {
    /// Reads the `Config-Item` fields of `message`.
    pub fn from_message(message: &Message) -> Self {
        let mut items = BTreeMap::new();
        for (name, value) in &message.fields {
            if name.eq_ignore_ascii_case("Config-Item") {
                if let Some((key, value)) = value.split_once('=') {
                    items.insert(key.to_string(), unquote(value));
                }
            }
        }
        Self { items }
    }

    /// The value of `key` (apt's keys compare without case).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
}

/// apt percent-encodes some characters of configuration values; undoes it.
fn unquote(value: &str) -> String {
    percent_decode(value).unwrap_or_else(|| value.to_string())
}

/// Decodes `%XX` escapes; `None` if one is malformed or the result is not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The release file name a `pir://HOST/PATH` URI asks for: PATH, percent-decoded, with empty
/// and `.` components dropped (flat repositories ask for `pir://host/./Packages`).
pub fn release_name(uri: &str) -> Result<String, String> {
    let rest = uri
        .strip_prefix("pir://")
        .ok_or_else(|| format!("{uri:?} is not a pir:// URI"))?;
    let path = rest.split_once('/').map_or("", |(_, path)| path);
    let path = path.split(['?', '#']).next().unwrap_or("");
    let path = percent_decode(path).ok_or_else(|| format!("{uri:?} has a malformed %-escape"))?;
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() {
        return Err(format!("{uri:?} names no file"));
    }
    if parts.contains(&"..") {
        return Err(format!("{uri:?} climbs out of the release with `..`"));
    }
    Ok(parts.join("/"))
}

/// Whether `name` is a package (fetched privately) rather than an index every client fetches.
pub fn is_package(name: &str) -> bool {
    name.ends_with(".deb") || name.ends_with(".udeb") || name.ends_with(".ddeb")
}

/// The capabilities the method announces.
pub fn capabilities() -> Message {
    Message::new(100, "Capabilities")
        .field("Version", "1.2")
        .field("Pipeline", "true")
        .field("Send-Config", "true")
        .field("Single-Instance", "true")
}

/// `400 URI Failure` for `uri` (may be empty when the request had none).
pub fn failure(uri: &str, message: &str, reason: Option<&str>) -> Message {
    let mut m = Message::new(400, "URI Failure")
        .field("URI", uri)
        .field("Message", message);
    if let Some(reason) = reason {
        m = m.field("FailReason", reason);
    }
    m
}

/// What apt expects of a file, from its `600 URI Acquire`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expected {
    /// `Expected-SHA256`, lowercase hex.
    pub sha256: Option<String>,
    /// `Expected-Checksum-FileSize`.
    pub size: Option<u64>,
}

impl Expected {
    /// Reads the expectations of an acquire message.
    pub fn from_message(message: &Message) -> Result<Self, String> {
        let size = match message.get("Expected-Checksum-FileSize") {
            Some(text) => Some(
                text.parse::<u64>()
                    .map_err(|_| format!("Expected-Checksum-FileSize {text:?} is not a number"))?,
            ),
            None => None,
        };
        Ok(Self {
            sha256: message.get("Expected-SHA256").map(str::to_ascii_lowercase),
            size,
        })
    }

    /// Checks `bytes` against the expectations; the mismatch in words.
    pub fn check(&self, bytes: &[u8], sha256_hex: &str) -> Result<(), String> {
        if let Some(size) = self.size {
            if size != bytes.len() as u64 {
                return Err(format!(
                    "size mismatch: the signed index says {size} bytes, the release has {}",
                    bytes.len()
                ));
            }
        }
        if let Some(expected) = &self.sha256 {
            if expected != sha256_hex {
                return Err(format!(
                    "hash sum mismatch: the signed index says SHA256 {expected}, the release has {sha256_hex}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn messages_parse_and_encode() {
        let m = parse(&lines(
            "600 URI Acquire\nURI: pir://updates/pool/main/j/jq/jq_1.6-2.1%2bdeb12u3_amd64.deb\nFilename: /tmp/x\nExpected-SHA256: ABCD\nExpected-Checksum-FileSize: 12",
        ))
        .unwrap();
        assert_eq!(m.code, 600);
        assert_eq!(m.status, "URI Acquire");
        assert_eq!(m.get("filename"), Some("/tmp/x"));
        let expected = Expected::from_message(&m).unwrap();
        assert_eq!(expected.sha256.as_deref(), Some("abcd"));
        assert_eq!(expected.size, Some(12));
        assert_eq!(
            release_name(m.get("URI").unwrap()).unwrap(),
            "pool/main/j/jq/jq_1.6-2.1+deb12u3_amd64.deb"
        );
        let text = capabilities().encode();
        assert!(text.starts_with("100 Capabilities\n") && text.ends_with("\n\n"));
        assert!(text.contains("Send-Config: true\n"));
        // A value can never inject a line.
        let f = failure("pir://x/a", "bad\n201 URI Done", None).encode();
        assert_eq!(f.matches('\n').count(), 4, "{f:?}");
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        for bad in [
            "",
            "hello",
            "60 x",
            "6000 x",
            "600 URI Acquire\nno colon here",
            "600 x\n: v",
        ] {
            assert!(parse(&lines(bad)).is_err(), "{bad:?}");
        }
        assert!(Expected::from_message(
            &parse(&lines("600 x\nExpected-Checksum-FileSize: lots")).unwrap()
        )
        .is_err());
    }

    #[test]
    fn uris_map_to_release_names() {
        assert_eq!(
            release_name("pir://updates/dists/bookworm/InRelease").unwrap(),
            "dists/bookworm/InRelease"
        );
        assert_eq!(
            release_name("pir://updates/./Packages").unwrap(),
            "Packages"
        );
        assert_eq!(
            release_name("pir://updates//./Packages.xz").unwrap(),
            "Packages.xz"
        );
        assert!(release_name("pir://updates/").is_err());
        assert!(release_name("http://updates/x").is_err());
        assert!(release_name("pir://updates/../etc/passwd").is_err());
        assert!(release_name("pir://updates/%zz").is_err());
        assert!(is_package("pool/main/h/hello/hello_2.10-3_amd64.deb"));
        assert!(!is_package("dists/bookworm/main/binary-amd64/Packages.xz"));
    }

    #[test]
    fn configuration_items_are_read() {
        let m = parse(&lines(
            "601 Configuration\nConfig-Item: Acquire::pir::MirrorList=/etc/pir/mirrors.pir\nConfig-Item: Acquire::pir::VendorKey=/etc/pir/vendor.pub\nConfig-Item: Dir::State=var/lib/apt/",
        ))
        .unwrap();
        let c = Config::from_message(&m);
        assert_eq!(
            c.get("acquire::pir::mirrorlist"),
            Some("/etc/pir/mirrors.pir")
        );
        assert_eq!(
            c.get("Acquire::pir::VendorKey"),
            Some("/etc/pir/vendor.pub")
        );
        assert_eq!(c.get("Acquire::pir::Nothing"), None);
    }
}
