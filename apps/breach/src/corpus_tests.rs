use super::*;

fn lines_of(input: &[u8]) -> Vec<(u64, Result<Vec<u8>, ()>)> {
    let mut reader = LineReader::new(input);
    let mut out = Vec::new();
    while let Some((n, line)) = reader.next_line().unwrap() {
        out.push((
            n,
            match line {
                Line::Text(t) => Ok(t.to_vec()),
                Line::TooLong => Err(()),
            },
        ));
    }
    out
}

#[test]
fn line_reader_endings_and_limits() {
    let long = vec![b'x'; MAX_LINE_BYTES + 1];
    let exact = vec![b'y'; MAX_LINE_BYTES];
    let mut input = b"a\r\nb\n\nc".to_vec();
    input.push(b'\n');
    input.extend_from_slice(&long);
    input.push(b'\n');
    input.extend_from_slice(&exact);
    input.extend_from_slice(b"\r\nlast");
    let lines = lines_of(&input);
    assert_eq!(lines[0], (1, Ok(b"a".to_vec())));
    assert_eq!(lines[1], (2, Ok(b"b".to_vec())));
    assert_eq!(lines[2], (3, Ok(vec![])));
    assert_eq!(lines[3], (4, Ok(b"c".to_vec())));
    assert_eq!(lines[4], (5, Err(())));
    assert_eq!(lines[5], (6, Ok(exact)));
    assert_eq!(lines[6], (7, Ok(b"last".to_vec())));
    assert_eq!(lines.len(), 7);
    assert!(lines_of(b"").is_empty());
}

#[test]
fn hibp_lines() {
    let e = parse_hibp_line(b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:52256179")
        .unwrap()
        .unwrap();
    assert_eq!(e.hash, password_sha1(b"password"));
    assert_eq!(e.count, 52256179);
    let lower = parse_hibp_line(b"5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8:1")
        .unwrap()
        .unwrap();
    assert_eq!(lower.hash, e.hash);
    assert_eq!(parse_hibp_line(b"").unwrap(), None);
    assert_eq!(
        parse_hibp_line(b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:0").unwrap(),
        None,
        "count 0 is HIBP padding"
    );
    for (bad, why) in [
        (&b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8"[..], "no ':'"),
        (
            b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD:1",
            "39 characters",
        ),
        (
            b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FDG:1",
            "not a hex digit",
        ),
        (
            b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:",
            "not a decimal",
        ),
        (
            b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:1,352",
            "not a decimal",
        ),
        (
            b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:-1",
            "not a decimal",
        ),
        (
            b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:99999999999999999999",
            "2^64",
        ),
        (
            b" 5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:1",
            "41 characters",
        ),
    ] {
        let err = parse_hibp_line(bad).unwrap_err();
        assert!(err.contains(why), "{err} should mention {why}");
    }
}

#[test]
fn hibp_suffix_lines() {
    let e = parse_hibp_suffix_line(0x5BAA6, b"1e4c9b93f3f0682250b6cf8331b7ee68fd8:3")
        .unwrap()
        .unwrap();
    assert_eq!(e.hash, password_sha1(b"password"));
    assert!(
        parse_hibp_suffix_line(0x5BAA6, b"1E4C9B93F3F0682250B6CF8331B7EE68FD:3")
            .unwrap_err()
            .contains("35 hex")
    );
    assert_eq!(
        parse_hibp_suffix_line(0, b"00000000000000000000000000000000000:0").unwrap(),
        None
    );
}

#[test]
fn password_and_pair_lines() {
    assert_eq!(parse_password_line(b"123456"), Some(&b"123456"[..]));
    assert_eq!(parse_password_line(b"#!comment: x"), None);
    assert_eq!(parse_password_line(b"#hash"), Some(&b"#hash"[..]));
    assert_eq!(parse_password_line(b""), None);
    assert_eq!(
        parse_pair_line(b"alice:pa:ss").unwrap(),
        Some((&b"alice"[..], &b"pa:ss"[..]))
    );
    assert_eq!(parse_pair_line(b"").unwrap(), None);
    assert!(parse_pair_line(b"alice").unwrap_err().contains("no ':'"));
    assert!(parse_pair_line(b":secret")
        .unwrap_err()
        .contains("username is empty"));
    assert!(parse_pair_line(b"alice:")
        .unwrap_err()
        .contains("password is empty"));
}

fn read(
    input: &[u8],
    format: CorpusFormat,
    policy: BadLines,
) -> Result<(Vec<Sha1Entry>, CorpusStats), BreachError> {
    let total = input.len() as u64;
    read_sha1_reader(input, "corpus.txt", format, policy, total, &mut |_, _| {})
}

/// Why the HIBP directory `dir` cannot be read.
fn hibp_dir_error(dir: &Path) -> BreachError {
    read_sha1_corpus(dir, CorpusFormat::Hibp, BadLines::Reject, &mut |_, _| {}).unwrap_err()
}

#[test]
fn bad_lines_name_file_and_line() {
    let input = b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:2\n\nnot a hash\n";
    let err = read(input, CorpusFormat::Hibp, BadLines::Reject).unwrap_err();
    assert!(err.is_peer_error());
    let text = err.to_string();
    assert!(text.starts_with("corpus.txt:3: no ':'"), "{text}");

    let (entries, stats) = read(input, CorpusFormat::Hibp, BadLines::Skip).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (
            stats.lines,
            stats.entry_lines,
            stats.skipped_lines,
            stats.bad_lines
        ),
        (3, 1, 1, 1)
    );
    assert_eq!(
        stats.bad_line_examples,
        vec!["corpus.txt:3: no ':' (expected SHA1HEX:COUNT)".to_string()]
    );
}

#[test]
fn duplicates_are_merged() {
    let input =
        b"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:2\n5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8:5\n";
    let (entries, _) = read(input, CorpusFormat::Hibp, BadLines::Reject).unwrap();
    assert_eq!(
        entries,
        vec![Sha1Entry {
            hash: password_sha1(b"password"),
            count: 7
        }]
    );

    let list = b"#!comment: list\nabc\r\nxyz\nabc\n\n";
    let (entries, stats) = read(list, CorpusFormat::Passwords, BadLines::Reject).unwrap();
    assert_eq!(entries.len(), 2);
    let abc = entries
        .iter()
        .find(|e| e.hash == password_sha1(b"abc"))
        .unwrap();
    assert_eq!(abc.count, 2);
    assert_eq!(stats.skipped_lines, 2);
}

#[test]
fn hibp_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("5BAA6.txt"),
        b"1E4C9B93F3F0682250B6CF8331B7EE68FD8:10\r\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("00000"),
        b"00000000000000000000000000000000001:1",
    )
    .unwrap();
    std::fs::write(dir.path().join(".hidden"), b"junk").unwrap();
    let mut calls = Vec::new();
    let (entries, stats) = read_sha1_corpus(
        dir.path(),
        CorpusFormat::Hibp,
        BadLines::Reject,
        &mut |d, t| calls.push((d, t)),
    )
    .unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].hash[19], 1);
    assert_eq!(
        entries[1],
        Sha1Entry {
            hash: password_sha1(b"password"),
            count: 10
        }
    );
    assert_eq!(stats.entry_lines, 2);
    assert_eq!(calls.last(), Some(&(77, 77)));

    std::fs::write(dir.path().join("README"), b"hello").unwrap();
    let err = hibp_dir_error(dir.path());
    assert!(err.to_string().contains("not an HIBP range file"), "{err}");
    std::fs::remove_file(dir.path().join("README")).unwrap();
    std::fs::write(dir.path().join("5baa6"), b"").unwrap();
    let err = hibp_dir_error(dir.path());
    assert!(
        err.to_string().contains("both files of prefix 5BAA6"),
        "{err}"
    );
}

#[test]
fn format_names() {
    for f in [
        CorpusFormat::Hibp,
        CorpusFormat::Passwords,
        CorpusFormat::Pairs,
    ] {
        assert_eq!(CorpusFormat::from_name(f.name()), Some(f));
    }
    assert_eq!(CorpusFormat::from_name("csv"), None);
}
