//! Breach corpora: streaming, line-by-line parsers with line numbers in every error.
//!
//! Three formats ([`CorpusFormat`]):
//!
//! - **hibp**: the HaveIBeenPwned "Pwned Passwords" download. Either one file of
//!   `SHA1HEX:COUNT` lines (40 hex digits, either case), or a directory of 16^5 files named by
//!   their 5-hex prefix (`00000`, `00000.txt`, either case) holding `SUFFIX:COUNT` lines with
//!   the other 35 hex digits, as the range API serves them. Duplicate hashes are merged by
//!   adding their counts. A count of 0 marks a padding line of the range API ("clients should
//!   exclude 0-usage hash suffixes") and is skipped, not stored.
//! - **passwords**: one password per line, taken as raw bytes (no re-encoding: a UTF-8 file
//!   gives the UTF-8 hashes HIBP uses). Each distinct password becomes the entry
//!   `SHA-1(password)` with its number of occurrences as count, so HIBP-style lookups and
//!   the range API work on it. Lines starting with `#!comment:` (John the Ripper's wordlist
//!   comments) are skipped.
//! - **pairs**: `username:password` lines, split at the *first* colon (passwords may contain
//!   colons, usernames of real services do not). The username must not be empty (an entry no
//!   client could ever match: every check names an account) and neither may the password.
//!
//! In every format a line ends at `\n`, an optional `\r` before it is dropped, blank lines are
//! skipped, and a line longer than [`MAX_LINE_BYTES`] is a bad line (it is never held in
//! memory whole). What happens to a bad line is the caller's choice ([`BadLines`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use sha1::{Digest, Sha1};

use crate::BreachError;
use pir_fs::PathError;

/// Longest line accepted, in bytes (without its line ending).
pub const MAX_LINE_BYTES: usize = 4096;

/// Lines starting with this are comments in John the Ripper wordlists (`password.lst`).
pub const JOHN_COMMENT_PREFIX: &[u8] = b"#!comment:";

/// Bad lines kept as examples in [`CorpusStats::bad_line_examples`].
pub const MAX_BAD_LINE_EXAMPLES: usize = 5;

/// The three corpus formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CorpusFormat {
    /// `SHA1HEX:COUNT` lines, or a directory of per-prefix `SUFFIX:COUNT` files.
    Hibp,
    /// One password per line.
    Passwords,
    /// `username:password` lines.
    Pairs,
}

impl CorpusFormat {
    /// The name used on the command line and in database headers' descriptions.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hibp => "hibp",
            Self::Passwords => "passwords",
            Self::Pairs => "pairs",
        }
    }

    /// Parses a name given by [`CorpusFormat::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Hibp, Self::Passwords, Self::Pairs]
            .into_iter()
            .find(|f| f.name() == name)
    }

    /// Whether entries are SHA-1 hashes of passwords (as opposed to blinded credentials).
    pub fn is_sha1(self) -> bool {
        !matches!(self, Self::Pairs)
    }
}

/// What to do with a malformed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BadLines {
    /// Stop at the first bad line with an error naming it (the default: a clean corpus is
    /// expected, and silently dropping data is worse than stopping).
    #[default]
    Reject,
    /// Skip bad lines, count them, and keep the first few as examples (real breach dumps are
    /// messy).
    Skip,
}

/// One SHA-1 hash and how often it occurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha1Entry {
    /// The SHA-1 hash.
    pub hash: [u8; 20],
    /// Occurrences (at least 1).
    pub count: u64,
}

/// What reading a corpus found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorpusStats {
    /// Lines read.
    pub lines: u64,
    /// Lines that gave an entry (before duplicates were merged).
    pub entry_lines: u64,
    /// Blank lines, comments and HIBP padding lines (count 0).
    pub skipped_lines: u64,
    /// Malformed lines skipped under [`BadLines::Skip`].
    pub bad_lines: u64,
    /// The first [`MAX_BAD_LINE_EXAMPLES`] bad lines, as `file:line: what`.
    pub bad_line_examples: Vec<String>,
}

/// `SHA-1(password)`.
pub fn password_sha1(password: &[u8]) -> [u8; 20] {
    Sha1::digest(password).into()
}

/// Parses one line of an HIBP file: `SHA1HEX:COUNT`. `Ok(None)` for a blank line or a
/// padding line (count 0).
pub fn parse_hibp_line(line: &[u8]) -> Result<Option<Sha1Entry>, String> {
    if line.is_empty() {
        return Ok(None);
    }
    let (hex, count) = split_colon(line, "SHA1HEX:COUNT")?;
    if hex.len() != 40 {
        return Err(format!(
            "the hash has {} characters; expected 40 hex digits (SHA1HEX:COUNT)",
            hex.len()
        ));
    }
    let mut hash = [0u8; 20];
    decode_hex_into(hex, &mut hash)?;
    Ok(parse_count(count)?.map(|count| Sha1Entry { hash, count }))
}

/// Parses one line of an HIBP per-prefix file: `SUFFIX:COUNT` with 35 hex digits, for the
/// 20-bit `prefix` named by the file. `Ok(None)` for a blank or padding line.
pub fn parse_hibp_suffix_line(prefix: u32, line: &[u8]) -> Result<Option<Sha1Entry>, String> {
    if line.is_empty() {
        return Ok(None);
    }
    let (hex, count) = split_colon(line, "SUFFIX:COUNT")?;
    if hex.len() != 35 {
        return Err(format!(
            "the suffix has {} characters; expected 35 hex digits (SUFFIX:COUNT)",
            hex.len()
        ));
    }
    // Prefix (5 digits) and suffix (35 digits) make the 40 digits of the hash.
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut digits = [0u8; 40];
    for (i, digit) in digits[..5].iter_mut().enumerate() {
        *digit = DIGITS[((prefix >> (4 * (4 - i))) & 0xf) as usize];
    }
    digits[5..].copy_from_slice(hex);
    let mut hash = [0u8; 20];
    decode_hex_into(&digits, &mut hash)?;
    Ok(parse_count(count)?.map(|count| Sha1Entry { hash, count }))
}

/// The password on a line of a password list; `None` for a blank line or a John comment.
pub fn parse_password_line(line: &[u8]) -> Option<&[u8]> {
    if line.is_empty() || line.starts_with(JOHN_COMMENT_PREFIX) {
        None
    } else {
        Some(line)
    }
}

/// A username and a password, as raw bytes.
pub type Credential<'a> = (&'a [u8], &'a [u8]);

/// Splits a `username:password` line at its first colon. `Ok(None)` for a blank line.
pub fn parse_pair_line(line: &[u8]) -> Result<Option<Credential<'_>>, String> {
    if line.is_empty() {
        return Ok(None);
    }
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or("no ':' between username and password (expected username:password)")?;
    let (user, password) = (&line[..colon], &line[colon + 1..]);
    if user.is_empty() {
        return Err("the username is empty (expected username:password)".into());
    }
    if password.is_empty() {
        return Err("the password is empty (expected username:password)".into());
    }
    Ok(Some((user, password)))
}

fn split_colon<'a>(line: &'a [u8], shape: &str) -> Result<(&'a [u8], &'a [u8]), String> {
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or_else(|| format!("no ':' (expected {shape})"))?;
    Ok((&line[..colon], &line[colon + 1..]))
}

fn decode_hex_into(hex: &[u8], out: &mut [u8]) -> Result<(), String> {
    let digit = |c: u8| -> Result<u8, String> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err("the hash has a character that is not a hex digit".into()),
        }
    };
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Ok(())
}

/// A decimal count; `None` for 0 (an HIBP padding line).
fn parse_count(text: &[u8]) -> Result<Option<u64>, String> {
    if text.is_empty() || text.len() > 20 || !text.iter().all(u8::is_ascii_digit) {
        return Err(
            "the count is not a decimal number (digits only, no sign, no separators)".into(),
        );
    }
    let count = text
        .iter()
        .try_fold(0u64, |acc, &d| {
            acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })
        .ok_or("the count is larger than 2^64 - 1")?;
    Ok((count > 0).then_some(count))
}

/// One line from a [`LineReader`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// The line's bytes, without `\n` or `\r\n`.
    Text(&'a [u8]),
    /// The line was longer than [`MAX_LINE_BYTES`]; its bytes were discarded.
    TooLong,
}

/// Reads lines of at most [`MAX_LINE_BYTES`] from any `BufRead`, counting line numbers and
/// bytes, never holding more than one bounded line in memory.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: R,
    buf: Vec<u8>,
    number: u64,
    bytes_read: u64,
}

impl<R: BufRead> LineReader<R> {
    /// Starts reading.
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            buf: Vec::with_capacity(256),
            number: 0,
            bytes_read: 0,
        }
    }

    /// Bytes consumed so far (line endings included).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The next line and its number (from 1), or `None` at the end of the input.
    pub fn next_line(&mut self) -> std::io::Result<Option<(u64, Line<'_>)>> {
        self.buf.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let content = &chunk[..if done { take - 1 } else { take }];
            // Keep one byte beyond the limit so a trailing '\r' can still be dropped.
            if !too_long && self.buf.len() + content.len() <= MAX_LINE_BYTES + 1 {
                self.buf.extend_from_slice(content);
            } else {
                too_long = true;
            }
            self.reader.consume(take);
            self.bytes_read += take as u64;
            if done {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.number += 1;
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        if too_long || self.buf.len() > MAX_LINE_BYTES {
            return Ok(Some((self.number, Line::TooLong)));
        }
        Ok(Some((self.number, Line::Text(&self.buf))))
    }
}

/// Applies a [`BadLines`] policy and keeps the statistics.
#[derive(Debug)]
pub(crate) struct LineBook {
    pub(crate) policy: BadLines,
    pub(crate) stats: CorpusStats,
}

impl LineBook {
    pub(crate) fn new(policy: BadLines) -> Self {
        Self {
            policy,
            stats: CorpusStats::default(),
        }
    }

    /// Records a bad line: an error under [`BadLines::Reject`], counted under
    /// [`BadLines::Skip`].
    pub(crate) fn bad(
        &mut self,
        source: &str,
        line: u64,
        message: String,
    ) -> Result<(), BreachError> {
        match self.policy {
            BadLines::Reject => Err(BreachError::Corpus {
                source_name: source.to_owned(),
                line,
                message,
            }),
            BadLines::Skip => {
                self.stats.bad_lines += 1;
                if self.stats.bad_line_examples.len() < MAX_BAD_LINE_EXAMPLES {
                    self.stats
                        .bad_line_examples
                        .push(format!("{source}:{line}: {message}"));
                }
                Ok(())
            }
        }
    }
}

/// Progress in bytes of input, reported at most every [`Progress::STEP`] bytes.
pub(crate) struct Progress<'a> {
    callback: &'a mut dyn FnMut(u64, u64),
    pub(crate) total: u64,
    base: u64,
    last: u64,
}

impl<'a> Progress<'a> {
    const STEP: u64 = 1 << 20;

    pub(crate) fn new(callback: &'a mut dyn FnMut(u64, u64), total: u64) -> Self {
        Self {
            callback,
            total,
            base: 0,
            last: 0,
        }
    }

    /// Reports `done` bytes of the current file (after earlier files' bytes).
    pub(crate) fn at(&mut self, done_in_file: u64) {
        let done = (self.base + done_in_file).min(self.total);
        if done >= self.last + Self::STEP {
            self.last = done;
            (self.callback)(done, self.total);
        }
    }

    /// Moves on to the next file after `file_bytes` bytes.
    pub(crate) fn next_file(&mut self, file_bytes: u64) {
        self.base += file_bytes;
    }

    /// Reports completion.
    pub(crate) fn finish(&mut self) {
        (self.callback)(self.total, self.total);
    }
}

/// Collects SHA-1 entries: sums the counts of equal hashes.
#[derive(Debug, Default)]
pub(crate) struct Sha1Collector {
    counts: HashMap<[u8; 20], u64>,
}

impl Sha1Collector {
    pub(crate) fn add(&mut self, hash: [u8; 20], count: u64) {
        let slot = self.counts.entry(hash).or_insert(0);
        *slot = slot.saturating_add(count);
    }

    /// The entries, sorted by hash.
    pub(crate) fn into_sorted(self) -> Vec<Sha1Entry> {
        let mut entries: Vec<Sha1Entry> = self
            .counts
            .into_iter()
            .map(|(hash, count)| Sha1Entry { hash, count })
            .collect();
        entries.sort_unstable();
        entries
    }
}

/// What receives each entry of a SHA-1 corpus, as read (not merged).
pub(crate) type Sha1Sink<'a> = dyn FnMut(Sha1Entry) -> Result<(), BreachError> + 'a;

/// Reads a SHA-1 corpus (HIBP lines, or a password list) from `reader` into `sink`.
/// `prefix` is the 20-bit prefix of an HIBP per-prefix file, `None` otherwise.
pub(crate) fn read_sha1_lines(
    reader: impl BufRead,
    source: &str,
    format: CorpusFormat,
    prefix: Option<u32>,
    book: &mut LineBook,
    sink: &mut Sha1Sink<'_>,
    progress: &mut Progress<'_>,
) -> Result<u64, BreachError> {
    each_line(reader, source, book, progress, |book, number, text| {
        let parsed = match (format, prefix) {
            (CorpusFormat::Passwords, _) => Ok(parse_password_line(text).map(|p| Sha1Entry {
                hash: password_sha1(p),
                count: 1,
            })),
            (_, Some(prefix)) => parse_hibp_suffix_line(prefix, text),
            (_, None) => parse_hibp_line(text),
        };
        match parsed {
            Ok(Some(entry)) => {
                book.stats.entry_lines += 1;
                sink(entry)?;
            }
            Ok(None) => book.stats.skipped_lines += 1,
            Err(message) => book.bad(source, number, message)?,
        }
        Ok(())
    })
}

/// Runs `f(book, line number, line)` on every line of `reader` short enough to parse; a
/// longer line is a bad line. Counts lines and reports progress. Returns the bytes read.
fn each_line(
    reader: impl BufRead,
    source: &str,
    book: &mut LineBook,
    progress: &mut Progress<'_>,
    mut f: impl FnMut(&mut LineBook, u64, &[u8]) -> Result<(), BreachError>,
) -> Result<u64, BreachError> {
    let mut lines = LineReader::new(reader);
    while let Some((number, line)) = lines.next_line().map_err(|e| io_in(source, e))? {
        book.stats.lines += 1;
        match line {
            Line::Text(text) => f(book, number, text)?,
            Line::TooLong => book.bad(
                source,
                number,
                format!("line longer than {MAX_LINE_BYTES} bytes"),
            )?,
        }
        progress.at(lines.bytes_read());
    }
    Ok(lines.bytes_read())
}

/// Reads a whole SHA-1 corpus (an HIBP file or directory, or a password list) at `path`.
/// Returns the entries sorted by hash with duplicates merged.
pub fn read_sha1_corpus(
    path: &Path,
    format: CorpusFormat,
    policy: BadLines,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Vec<Sha1Entry>, CorpusStats), BreachError> {
    let mut collector = Sha1Collector::default();
    let stats = for_each_sha1(path, format, policy, progress, &mut |e| {
        collector.add(e.hash, e.count);
        Ok(())
    })?;
    Ok((collector.into_sorted(), stats))
}

/// Calls `sink` with every entry of the SHA-1 corpus at `path` as read (in file order,
/// duplicates not merged), holding nothing else: what a build in bounded memory reads.
pub(crate) fn for_each_sha1(
    path: &Path,
    format: CorpusFormat,
    policy: BadLines,
    progress: &mut dyn FnMut(u64, u64),
    sink: &mut Sha1Sink<'_>,
) -> Result<CorpusStats, BreachError> {
    if !format.is_sha1() {
        return Err(BreachError::Input(
            "username:password corpora are read with for_each_pair".into(),
        ));
    }
    let meta = std::fs::metadata(path).map_err(PathError::at(path))?;
    let mut book = LineBook::new(policy);
    if !meta.is_dir() {
        let reader = BufReader::new(File::open(path).map_err(PathError::at(path))?);
        let source = path.display().to_string();
        let mut progress = Progress::new(progress, meta.len());
        read_sha1_lines(
            reader,
            &source,
            format,
            None,
            &mut book,
            sink,
            &mut progress,
        )?;
        progress.finish();
        return Ok(book.stats);
    }
    if format != CorpusFormat::Hibp {
        return Err(BreachError::Input(format!(
            "{} is a directory; only the hibp format reads a directory of per-prefix files",
            path.display()
        )));
    }
    let files = hibp_prefix_files(path)?;
    let total = files.iter().map(|f| f.size).sum();
    let mut progress = Progress::new(progress, total);
    for PrefixFile {
        prefix,
        path: file,
        size,
    } in files
    {
        let source = file.display().to_string();
        let reader = BufReader::new(File::open(&file).map_err(PathError::at(&file))?);
        read_sha1_lines(
            reader,
            &source,
            format,
            Some(prefix),
            &mut book,
            sink,
            &mut progress,
        )?;
        progress.next_file(size);
    }
    progress.finish();
    Ok(book.stats)
}

/// A SHA-1 corpus of one file (not a directory of per-prefix files) from `reader`, `total`
/// bytes long and named `source` in errors: the entries sorted by hash with duplicates merged.
#[cfg(test)]
pub(crate) fn read_sha1_reader(
    reader: impl BufRead,
    source: &str,
    format: CorpusFormat,
    policy: BadLines,
    total: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Vec<Sha1Entry>, CorpusStats), BreachError> {
    let mut book = LineBook::new(policy);
    let mut collector = Sha1Collector::default();
    let mut progress = Progress::new(progress, total);
    read_sha1_lines(
        reader,
        source,
        format,
        None,
        &mut book,
        &mut |e| {
            collector.add(e.hash, e.count);
            Ok(())
        },
        &mut progress,
    )?;
    progress.finish();
    Ok((collector.into_sorted(), book.stats))
}

/// One per-prefix file of an HIBP directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PrefixFile {
    /// The 20-bit prefix its name gives.
    pub prefix: u32,
    /// The file.
    pub path: std::path::PathBuf,
    /// Its size in bytes.
    pub size: u64,
}

/// The per-prefix files of an HIBP directory, sorted by prefix.
/// Hidden files (starting with `.`) are ignored; any other name is an error, so a wrong
/// directory is not taken for a corpus.
pub fn hibp_prefix_files(dir: &Path) -> Result<Vec<PrefixFile>, BreachError> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(PathError::at(dir))? {
        let entry = entry.map_err(PathError::at(dir))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let stem = name
            .strip_suffix(".txt")
            .or_else(|| name.strip_suffix(".TXT"))
            .unwrap_or(&name);
        let prefix = (stem.len() == 5)
            .then(|| u32::from_str_radix(stem, 16).ok())
            .flatten()
            .filter(|_| stem.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(prefix) = prefix else {
            return Err(BreachError::Input(format!(
                "{}: not an HIBP range file; an HIBP directory holds files named by a 5-hex \
                 prefix (00000 or 00000.txt) and nothing else",
                path.display()
            )));
        };
        let meta = std::fs::metadata(&path).map_err(PathError::at(&path))?;
        if !meta.is_file() {
            return Err(BreachError::Input(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
        files.push(PrefixFile {
            prefix,
            path,
            size: meta.len(),
        });
    }
    files.sort();
    if let Some(pair) = files.windows(2).find(|p| p[0].prefix == p[1].prefix) {
        return Err(BreachError::Input(format!(
            "{} and {} are both files of prefix {:05X}",
            pair[0].path.display(),
            pair[1].path.display(),
            pair[0].prefix
        )));
    }
    if files.is_empty() {
        return Err(BreachError::Input(format!(
            "{} holds no HIBP range files (named 00000 to FFFFF)",
            dir.display()
        )));
    }
    Ok(files)
}

/// What receives each `(username, password)` of a pairs corpus.
pub(crate) type PairSink<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), BreachError> + 'a;

/// Calls `f(username, password)` for every pair in `reader`.
pub(crate) fn read_pair_lines(
    reader: impl BufRead,
    source: &str,
    book: &mut LineBook,
    progress: &mut Progress<'_>,
    f: &mut PairSink<'_>,
) -> Result<(), BreachError> {
    each_line(reader, source, book, progress, |book, number, text| {
        match parse_pair_line(text) {
            Ok(Some((user, password))) => {
                book.stats.entry_lines += 1;
                f(user, password)?;
            }
            Ok(None) => book.stats.skipped_lines += 1,
            Err(message) => book.bad(source, number, message)?,
        }
        Ok(())
    })
    .map(|_| ())
}

fn io_in(source: &str, e: std::io::Error) -> BreachError {
    BreachError::Io(PathError {
        path: source.to_owned(),
        source: e,
    })
}

#[cfg(test)]
#[path = "corpus_tests.rs"]
mod tests;
