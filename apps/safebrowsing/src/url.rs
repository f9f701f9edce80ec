//! What a Safe Browsing v4 client hashes, so that lists built here match what Firefox asks for.
//!
//! A browser does not look up a URL as typed. It canonicalizes it, forms up to 30
//! host-suffix / path-prefix expressions (`b.c/1/`), hashes each with SHA-256, and checks the
//! 4-byte prefixes of those full hashes against its local list; only on a prefix match does it
//! ask for the full hashes. [`canonicalize`] and [`expressions`] follow the "URLs and Hashing"
//! section of the Safe Browsing v4 API documentation (the rules, and the test URLs in
//! `tests`, are from there); [`full_hashes`] is what a server list is built from.

use std::fmt::Write as _;

/// Why a URL cannot be canonicalized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// Nothing is left once whitespace and the fragment are removed, or the host is empty.
    #[error("{0:?} has no host")]
    NoHost(String),
    /// Longer than [`MAX_URL_BYTES`].
    #[error("the URL is {0} bytes; at most {MAX_URL_BYTES} are accepted")]
    TooLong(usize),
}

/// Longest URL accepted (browsers cap URLs at about 2 MB; lists hold far shorter ones).
pub const MAX_URL_BYTES: usize = 64 << 10;

/// A canonical URL: the parts the expressions are made of, each already escaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    /// `http`, `https`... (lowercase).
    pub scheme: String,
    /// Lowercase, dots normalized, an IPv4 address in dotted decimal.
    pub host: String,
    /// Starts with `/`; dot segments resolved, runs of `/` collapsed.
    pub path: String,
    /// Everything after the first `?`, untouched but escaped (`None` without a `?`).
    pub query: Option<String>,
}

impl std::fmt::Display for Canonical {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.host, self.path)?;
        if let Some(query) = &self.query {
            write!(f, "?{query}")?;
        }
        Ok(())
    }
}

/// Canonicalizes `url` as a Safe Browsing v4 client does.
///
/// Leading and trailing spaces go, and so do tab, CR and LF anywhere, and the fragment. The
/// URL is percent-unescaped until nothing changes. A missing scheme means `http`. User info and
/// the port are dropped. The host loses leading and trailing dots, runs of dots become one, an
/// IPv4 address in any `inet_aton` form becomes dotted decimal, and it is lowercased. The path
/// has `/./` and `/../` resolved and runs of `/` collapsed (the query is left alone). Finally
/// every byte up to space, from 0x7f, `#` and `%` is percent-escaped in uppercase hex.
pub fn canonicalize(url: &str) -> Result<Canonical, UrlError> {
    if url.len() > MAX_URL_BYTES {
        return Err(UrlError::TooLong(url.len()));
    }
    let trimmed = url.trim_matches(|c: char| c == ' ' || c.is_ascii_whitespace());
    let mut bytes: Vec<u8> = trimmed
        .bytes()
        .filter(|&b| b != b'\t' && b != b'\r' && b != b'\n')
        .collect();
    if let Some(hash) = bytes.iter().position(|&b| b == b'#') {
        bytes.truncate(hash);
    }
    // Unescape until stable: each round only shortens the URL, so this ends.
    loop {
        let next = unescape(&bytes);
        if next == bytes {
            break;
        }
        bytes = next;
    }
    // A scheme is a letter, then letters, digits, `+`, `-` or `.` (RFC 3986), before `://`.
    let scheme_end = find(&bytes, b"://").filter(|&at| {
        at > 0
            && bytes[0].is_ascii_alphabetic()
            && bytes[..at]
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.')
    });
    let (scheme, rest) = match scheme_end {
        Some(at) => (
            String::from_utf8_lossy(&bytes[..at]).to_ascii_lowercase(),
            &bytes[at + 3..],
        ),
        None => ("http".to_string(), &bytes[..]),
    };
    let authority_end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(authority_end);
    let (path, query) = match rest.iter().position(|&b| b == b'?') {
        Some(q) => (&rest[..q], Some(&rest[q + 1..])),
        None => (rest, None),
    };
    let host = canonical_host(authority);
    if host.is_empty() {
        return Err(UrlError::NoHost(url.to_string()));
    }
    Ok(Canonical {
        scheme,
        host: escape(&host),
        path: escape(&canonical_path(path)),
        query: query.map(escape),
    })
}

/// The host-suffix / path-prefix expressions of a canonical URL, at most 5 hosts x 6 paths,
/// in the documented order, without duplicates (`a.b.c/1/2.html?param=1`, `a.b.c/1/2.html`,
/// `a.b.c/`, `a.b.c/1/`, `b.c/1/2.html?param=1`...).
pub fn expressions(url: &Canonical) -> Vec<String> {
    let mut out = Vec::new();
    for host in host_suffixes(&url.host) {
        for path in path_prefixes(&url.path, url.query.as_deref()) {
            let expression = format!("{host}{path}");
            if !out.contains(&expression) {
                out.push(expression);
            }
        }
    }
    out
}

/// SHA-256 of every expression of `url`: the full hashes a list holds and a client asks for.
pub fn full_hashes(url: &str) -> Result<Vec<[u8; 32]>, UrlError> {
    let canonical = canonicalize(url)?;
    Ok(expressions(&canonical)
        .iter()
        .map(|e| pir_keys::sha256(e.as_bytes()))
        .collect())
}

/// The full hash of one list entry: a URL or a bare host (`evil.example` means every page of
/// that host, i.e. the expression `evil.example/`), canonicalized first.
pub fn entry_hash(entry: &str) -> Result<[u8; 32], UrlError> {
    let canonical = canonicalize(entry)?;
    let mut expression = format!("{}{}", canonical.host, canonical.path);
    if let Some(query) = &canonical.query {
        let _ = write!(expression, "?{query}");
    }
    Ok(pir_keys::sha256(expression.as_bytes()))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One round of percent-unescaping (`%` not followed by two hex digits stays).
fn unescape(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// Escapes bytes up to space, from 0x7f, `#` and `%`, in uppercase hex.
fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b <= 0x20 || b >= 0x7f || b == b'#' || b == b'%' {
            let _ = write!(out, "%{b:02X}");
        } else {
            out.push(b as char);
        }
    }
    out
}

/// The host of an authority (user info and port dropped), dots and case normalized, an IPv4
/// address in dotted decimal.
fn canonical_host(authority: &[u8]) -> Vec<u8> {
    let host = match authority.iter().rposition(|&b| b == b'@') {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    // Drop a port and normalize dots until neither changes anything (`host:.` loses its dot,
    // then its empty port), so that a canonical URL canonicalizes to itself.
    let mut host = host.to_vec();
    loop {
        let unported = match host.iter().rposition(|&b| b == b':') {
            Some(colon) if host[colon + 1..].iter().all(u8::is_ascii_digit) => &host[..colon],
            _ => &host[..],
        };
        let parts: Vec<&[u8]> = unported
            .split(|&b| b == b'.')
            .filter(|p| !p.is_empty())
            .collect();
        let next = parts.join(&b'.');
        if next == host {
            break;
        }
        host = next;
    }
    let parts: Vec<&[u8]> = host.split(|&b| b == b'.').collect();
    let joined = host.clone();
    if let Some(ip) = ipv4(&parts) {
        return ip.into_bytes();
    }
    joined.to_ascii_lowercase()
}

/// `inet_aton`: 1 to 4 numbers (decimal, `0` octal, `0x` hex), the last filling what is left.
fn ipv4(parts: &[&[u8]]) -> Option<String> {
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let number = |p: &[u8]| -> Option<u64> {
        let text = std::str::from_utf8(p).ok()?;
        let (digits, radix) =
            if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
                (h, 16)
            } else if text.len() > 1 && text.starts_with('0') {
                (&text[1..], 8)
            } else {
                (text, 10)
            };
        if digits.is_empty() {
            return (radix == 16).then_some(0);
        }
        u64::from_str_radix(digits, radix).ok()
    };
    let values: Vec<u64> = parts.iter().map(|p| number(p)).collect::<Option<_>>()?;
    let (last, head) = values.split_last()?;
    if head.iter().any(|&v| v > 255) {
        return None;
    }
    let room = 8 * (4 - head.len() as u32);
    if room < 64 && *last >= 1u64 << room {
        return None;
    }
    let mut address = 0u32;
    for (k, &v) in head.iter().enumerate() {
        address |= (v as u32) << (24 - 8 * k as u32);
    }
    address |= *last as u32;
    let [a, b, c, d] = address.to_be_bytes();
    Some(format!("{a}.{b}.{c}.{d}"))
}

/// Resolves `.` and `..` segments and collapses runs of `/`; empty becomes `/`.
fn canonical_path(path: &[u8]) -> Vec<u8> {
    let mut segments: Vec<&[u8]> = Vec::new();
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let last = parts.last().copied().unwrap_or(b"");
    for part in &parts {
        match *part {
            b"" | b"." => {}
            b".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    let directory = last.is_empty() || last == b"." || last == b"..";
    let mut out = vec![b'/'];
    out.extend(segments.join(&b'/'));
    if directory && !segments.is_empty() {
        out.push(b'/');
    }
    out
}

/// The host and up to 4 suffixes of its last 5 components (never the top-level domain alone);
/// an IP address only as it is.
fn host_suffixes(host: &str) -> Vec<String> {
    let mut hosts = vec![host.to_string()];
    let is_ip = host.split('.').count() == 4 && host.split('.').all(|p| p.parse::<u8>().is_ok());
    if is_ip {
        return hosts;
    }
    let parts: Vec<&str> = host.split('.').collect();
    let start = parts.len().saturating_sub(5);
    for k in start..parts.len().saturating_sub(1) {
        let suffix = parts[k..].join(".");
        if !hosts.contains(&suffix) && hosts.len() < 5 {
            hosts.push(suffix);
        }
    }
    hosts
}

/// The path with its query, without it, and up to 4 prefixes from the root, each ending in `/`.
fn path_prefixes(path: &str, query: Option<&str>) -> Vec<String> {
    let mut paths = Vec::new();
    if let Some(query) = query {
        paths.push(format!("{path}?{query}"));
    }
    paths.push(path.to_string());
    let mut prefix = String::from("/");
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let directories = if path.ends_with('/') {
        components.len()
    } else {
        components.len().saturating_sub(1)
    };
    // The root and at most 3 directories below it.
    for k in 0..=directories.min(3) {
        if k > 0 {
            prefix.push_str(components[k - 1]);
            prefix.push('/');
        }
        if !paths.contains(&prefix) {
            paths.push(prefix.clone());
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The canonicalization examples of the Safe Browsing v4 documentation.
    #[test]
    fn documented_canonical_forms() {
        let cases: &[(&str, &str)] = &[
            ("http://host/%25%32%35", "http://host/%25"),
            ("http://host/%25%32%35%25%32%35", "http://host/%25%25"),
            ("http://host/%2525252525252525", "http://host/%25"),
            ("http://host/asdf%25%32%35asd", "http://host/asdf%25asd"),
            ("http://host/%%%25%32%35asd%%", "http://host/%25%25%25asd%25%25"),
            ("http://www.google.com/", "http://www.google.com/"),
            (
                "http://%31%36%38%2e%31%38%38%2e%39%39%2e%32%36/%2E%73%65%63%75%72%65/%77%77%77%2E%65%62%61%79%2E%63%6F%6D/",
                "http://168.188.99.26/.secure/www.ebay.com/",
            ),
            (
                "http://195.127.0.11/uploads/%20%20%20%20/.verify/.eBaysecure=updateuserdataxplimnbqmn-xplmvalidateinfoswqpcmlx=hgplmcx/",
                "http://195.127.0.11/uploads/%20%20%20%20/.verify/.eBaysecure=updateuserdataxplimnbqmn-xplmvalidateinfoswqpcmlx=hgplmcx/",
            ),
            (
                "http://host%23.com/%257Ea%2521b%2540c%2523d%2524e%25f%255E00%252611%252A22%252833%252944_55%252B",
                "http://host%23.com/~a!b@c%23d$e%25f^00&11*22(33)44_55+",
            ),
            ("http://3279880203/blah", "http://195.127.0.11/blah"),
            ("http://www.google.com/blah/..", "http://www.google.com/"),
            ("www.google.com/", "http://www.google.com/"),
            ("www.google.com", "http://www.google.com/"),
            ("http://www.evil.com/blah#frag", "http://www.evil.com/blah"),
            ("http://www.GOOgle.com/", "http://www.google.com/"),
            ("http://www.google.com.../", "http://www.google.com/"),
            ("http://www.google.com/foo\tbar\rbaz\n2", "http://www.google.com/foobarbaz2"),
            ("http://www.google.com/q?", "http://www.google.com/q?"),
            ("http://www.google.com/q?r?", "http://www.google.com/q?r?"),
            ("http://www.google.com/q?r?s", "http://www.google.com/q?r?s"),
            ("http://evil.com/foo#bar#baz", "http://evil.com/foo"),
            ("http://evil.com/foo;", "http://evil.com/foo;"),
            ("http://evil.com/foo?bar;", "http://evil.com/foo?bar;"),
            ("http://\u{1}\u{80}.com/", "http://%01%C2%80.com/"),
            ("http://notrailingslash.com", "http://notrailingslash.com/"),
            ("http://www.gotaport.com:1234/", "http://www.gotaport.com/"),
            ("  http://www.google.com/  ", "http://www.google.com/"),
            ("http:// leadingspace.com/", "http://%20leadingspace.com/"),
            ("http://%20leadingspace.com/", "http://%20leadingspace.com/"),
            ("%20leadingspace.com/", "http://%20leadingspace.com/"),
            ("https://www.securesite.com/", "https://www.securesite.com/"),
            ("http://host.com/ab%23cd", "http://host.com/ab%23cd"),
            ("http://host.com//twoslashes?more//slashes", "http://host.com/twoslashes?more//slashes"),
        ];
        for (input, expect) in cases {
            assert_eq!(
                canonicalize(input).unwrap().to_string(),
                *expect,
                "{input:?}"
            );
        }
    }

    /// The expression examples of the documentation.
    #[test]
    fn documented_expressions() {
        let e = |url: &str| expressions(&canonicalize(url).unwrap());
        assert_eq!(
            e("http://a.b.c/1/2.html?param=1"),
            [
                "a.b.c/1/2.html?param=1",
                "a.b.c/1/2.html",
                "a.b.c/",
                "a.b.c/1/",
                "b.c/1/2.html?param=1",
                "b.c/1/2.html",
                "b.c/",
                "b.c/1/",
            ]
        );
        assert_eq!(
            e("http://a.b.c.d.e.f.g/1.html"),
            [
                "a.b.c.d.e.f.g/1.html",
                "a.b.c.d.e.f.g/",
                "c.d.e.f.g/1.html",
                "c.d.e.f.g/",
                "d.e.f.g/1.html",
                "d.e.f.g/",
                "e.f.g/1.html",
                "e.f.g/",
                "f.g/1.html",
                "f.g/",
            ]
        );
        assert_eq!(e("http://1.2.3.4/1/"), ["1.2.3.4/1/", "1.2.3.4/"]);
        // At most 4 prefixes from the root: /, /1/, /1/2/, /1/2/3/.
        let deep = e("http://x.com/1/2/3/4/5/6.html");
        assert_eq!(
            deep,
            [
                "x.com/1/2/3/4/5/6.html",
                "x.com/",
                "x.com/1/",
                "x.com/1/2/",
                "x.com/1/2/3/",
            ]
        );
    }

    #[test]
    fn list_entries_hash_their_expression_and_match_a_visit() {
        // A bare host in a list matches every page of it: its expression `host/` is among the
        // expressions of any URL of that host.
        let entry = entry_hash("Evil.Example.").unwrap();
        assert_eq!(entry, pir_keys::sha256(b"evil.example/"));
        let visit = full_hashes("https://www.evil.example/some/page.html?x=1").unwrap();
        assert!(visit.contains(&entry));
        assert!(!full_hashes("https://good.example/")
            .unwrap()
            .contains(&entry));
    }

    #[test]
    fn odd_input_is_an_error_or_a_url_never_a_panic() {
        assert!(matches!(canonicalize(""), Err(UrlError::NoHost(_))));
        assert!(matches!(
            canonicalize("http:///path"),
            Err(UrlError::NoHost(_))
        ));
        assert!(matches!(
            canonicalize(&"a".repeat(MAX_URL_BYTES + 1)),
            Err(UrlError::TooLong(_))
        ));
        for odd in [
            "%",
            "%%%",
            "http://%zz/",
            "http://[::1]/",
            "http://a:b@c:99999999999/x",
            "http://0x/",
            "http://1.2.3.4.5/",
            "http://4294967296/",
            "http://256.1.1.1/",
        ] {
            let _ = canonicalize(odd).map(|c| expressions(&c));
        }
        assert_eq!(canonicalize("http://256.1.1.1/").unwrap().host, "256.1.1.1");
        assert_eq!(canonicalize("http://0x7f.1/").unwrap().host, "127.0.0.1");
        assert_eq!(
            canonicalize("http://017700000001/").unwrap().host,
            "127.0.0.1"
        );
    }
}
#[cfg(test)]
mod idempotence {
    #[test]
    fn canonical_urls_canonicalize_to_themselves() {
        for input in [
            "pir://\u{15}@$pir:./\u{15}",
            "http://host:./",
            "http://h.com.:80/",
            "http://a:/",
        ] {
            let once = super::canonicalize(input).unwrap().to_string();
            let twice = super::canonicalize(&once).unwrap().to_string();
            assert_eq!(once, twice, "{input:?}");
        }
    }
}
