//! Tests of release building and opening (kept apart from `release.rs` to keep both short).

use super::*;
use crate::testutil::{other_key, vendor_key};
use proptest::prelude::*;
use std::io::{Seek, SeekFrom};

const B: usize = 256;

/// Deterministic, non-zero content so a misplaced block or missing padding shows.
fn content(len: usize, tag: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(tag) | 1)
        .collect()
}

/// A tree with files of assorted sizes: empty, exactly one block, one byte over, nested.
fn make_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let files = vec![
        ("empty.txt".to_owned(), Vec::new()),
        ("exact.bin".to_owned(), content(B, 1)),
        ("over.bin".to_owned(), content(B + 1, 2)),
        ("a/b/c/deep.deb".to_owned(), content(5000, 3)),
        ("a/b/small".to_owned(), content(3, 4)),
        ("big.iso".to_owned(), content(40 * B + 17, 5)),
        ("z/Ünïcode.deb".to_owned(), content(700, 6)),
    ];
    for (name, bytes) in &files {
        let path = root.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    files
}

fn opts(block_size: Option<usize>, size_classes: bool) -> BuildOptions {
    BuildOptions {
        block_size,
        size_classes,
        progress: false,
        ..BuildOptions::default()
    }
}

/// Builds a release of `make_tree` and returns (tempdir, input files, release dir, report).
fn built(
    options: &BuildOptions,
) -> (
    tempfile::TempDir,
    Vec<(String, Vec<u8>)>,
    PathBuf,
    BuildReport,
) {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let files = make_tree(&input);
    let out = tmp.path().join("release");
    let report = build(&input, &vendor_key(), &out, options).unwrap();
    (tmp, files, out, report)
}

/// Every file's bytes, hash and layout agree with the input; padding is zero.
fn check_release(release: &Release, files: &[(String, Vec<u8>)], size_classes: bool) {
    let m = &release.manifest;
    let b = m.block_size as usize;
    assert_eq!(m.files.len(), files.len());
    let mut names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        m.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        names
    );
    let mut next = 0;
    for (name, bytes) in files {
        let entry = m.file(name).unwrap();
        assert_eq!(release.file_bytes(entry), &bytes[..], "{name}");
        assert_eq!(entry.sha256, pir_keys::sha256(bytes), "{name}");
        assert_eq!(entry.size, bytes.len() as u64);
        // The tree holds packages, so size classes pad only them.
        assert_eq!(
            entry.block_count,
            padded_block_count(entry.size, b, size_classes && crate::apt::is_package(name)),
            "{name}"
        );
        let start = entry.first_block as usize * b;
        let end = start + entry.block_count as usize * b;
        assert!(release.database.bytes()[start + bytes.len()..end]
            .iter()
            .all(|&x| x == 0));
    }
    for entry in &m.files {
        assert_eq!(entry.first_block, next, "files are packed back to back");
        next += entry.block_count;
    }
    assert_eq!(next, m.block_count);
    for (i, hash) in m.block_hashes.iter().enumerate() {
        assert_eq!(*hash, pir_keys::sha256(release.database.block(i)));
    }
    assert_eq!(
        release.release_id,
        pir_keys::sha256(&release.manifest_bytes)
    );
}

#[test]
fn build_then_open_verifies_every_file() {
    let (_tmp, files, out, report) = built(&opts(Some(B), false));
    let release = open(&out, Some(&vendor_key().public()), true).unwrap();
    check_release(&release, &files, false);
    assert_eq!(report.files, files.len());
    assert_eq!(report.block_size, B);
    assert_eq!(report.block_count, release.manifest.block_count);
    assert_eq!(
        report.payload_bytes,
        files.iter().map(|(_, b)| b.len() as u64).sum::<u64>()
    );
    assert_eq!(report.database_bytes, report.block_count * B as u64);
    assert_eq!(
        fs::metadata(out.join(DATABASE_FILE)).unwrap().len(),
        report.database_bytes
    );
    // empty = 1 block, exact = 1, one byte over = 2.
    assert_eq!(release.manifest.file("empty.txt").unwrap().block_count, 1);
    assert_eq!(release.manifest.file("exact.bin").unwrap().block_count, 1);
    assert_eq!(release.manifest.file("over.bin").unwrap().block_count, 2);
    assert!(report.block_size_reason.contains("as requested"));
    // Only the release itself is left beside the input: no temporary directories.
    let mut left: Vec<_> = fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["input", "release"]);
    let mut inside: Vec<_> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    inside.sort();
    assert_eq!(inside, [DATABASE_FILE, MANIFEST_FILE]);
}

#[test]
fn automatic_block_size_and_unverified_open() {
    let (_tmp, files, out, report) = built(&opts(None, false));
    // The rule runs over the package files only (the tree has two .deb files).
    let sizes: Vec<u64> = files
        .iter()
        .filter(|(n, _)| crate::apt::is_package(n))
        .map(|(_, b)| b.len() as u64)
        .collect();
    assert_eq!(sizes.len(), 2);
    let (b, why) = choose_block_size(&sizes, false);
    assert_eq!(
        (report.block_size, report.block_size_reason.clone()),
        (b, format!("{why} (over the 2 package files)"))
    );
    let release = open(&out, None, true).unwrap();
    check_release(&release, &files, false);
}

#[test]
fn size_classes_pad_packages_to_powers_of_two() {
    let (_tmp, files, out, _) = built(&opts(Some(B), true));
    let release = open(&out, Some(&vendor_key().public()), true).unwrap();
    check_release(&release, &files, true);
    for entry in &release.manifest.files {
        if crate::apt::is_package(&entry.name) {
            assert!(entry.block_count.is_power_of_two(), "{}", entry.name);
        }
    }
    // 5000 bytes = 20 blocks of 256 -> class 32. The other files are not packages (in a
    // repository: the indices every client fetches alike) and are not padded: 40 blocks + 17
    // bytes take 41 blocks.
    assert_eq!(
        release.manifest.file("a/b/c/deep.deb").unwrap().block_count,
        32
    );
    assert_eq!(release.manifest.file("big.iso").unwrap().block_count, 41);
}

#[test]
fn a_tree_without_packages_pads_every_file() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    for (name, len) in [("a.bin", 5000usize), ("b.bin", 41 * B - 3)] {
        fs::create_dir_all(&src).unwrap();
        fs::write(src.join(name), content(len, 9)).unwrap();
    }
    let out = tmp.path().join("out");
    build(&src, &vendor_key(), &out, &opts(Some(B), true)).unwrap();
    let m = open(&out, None, false).unwrap().manifest;
    assert_eq!(m.file("a.bin").unwrap().block_count, 32);
    assert_eq!(m.file("b.bin").unwrap().block_count, 64);
}

#[test]
fn manifest_is_deterministic_apart_from_time() {
    let (_t1, _, out1, _) = built(&opts(Some(B), false));
    let (_t2, _, out2, _) = built(&opts(Some(B), false));
    let mut m1 = open(&out1, None, false).unwrap().manifest;
    let m2 = open(&out2, None, false).unwrap().manifest;
    // The build time and what derives from it (the default release counter and the expiry)
    // differ when the two builds straddle a second; everything else must be identical.
    assert_eq!(
        m1.release_version - m1.created_unix,
        m2.release_version - m2.created_unix
    );
    assert_eq!(
        m1.expires_unix - m1.created_unix,
        m2.expires_unix - m2.created_unix
    );
    m1.created_unix = m2.created_unix;
    m1.release_version = m2.release_version;
    m1.expires_unix = m2.expires_unix;
    assert_eq!(m1, m2);
    assert_eq!(
        fs::read(out1.join(DATABASE_FILE)).unwrap(),
        fs::read(out2.join(DATABASE_FILE)).unwrap()
    );
}

#[test]
fn tampered_database_names_the_block() {
    let (_tmp, _, out, _) = built(&opts(Some(B), false));
    let release = open(&out, None, false).unwrap();
    let target = release.manifest.file("big.iso").unwrap().first_block + 3;
    drop(release);
    let db = out.join(DATABASE_FILE);
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&db)
        .unwrap();
    file.seek(SeekFrom::Start(target * B as u64 + 5)).unwrap();
    let mut byte = [0u8];
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(target * B as u64 + 5)).unwrap();
    file.write_all(&[byte[0] ^ 0x40]).unwrap();
    drop(file);

    let err = open(&out, Some(&vendor_key().public()), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("block {target} ")), "{err}");
    assert!(err.contains("big.iso"), "{err}");
    // Without verification the mirror opens it (the check is the caller's choice).
    open(&out, None, false).unwrap();
}

#[test]
fn wrong_length_database_is_refused() {
    let (_tmp, _, out, _) = built(&opts(Some(B), false));
    let db = out.join(DATABASE_FILE);
    let len = fs::metadata(&db).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    let err = open(&out, None, false).unwrap_err();
    assert!(matches!(err, UpdateError::Format(_)), "{err}");
    assert!(err.to_string().contains("copy the release again"), "{err}");
}

#[test]
fn tampered_or_foreign_manifest_is_refused() {
    let (_tmp, _, out, _) = built(&opts(Some(B), false));
    let err = open(&out, Some(&other_key().public()), false).unwrap_err();
    assert!(matches!(err, UpdateError::Signature(_)), "{err}");
    assert!(err.to_string().contains(MANIFEST_FILE), "{err}");
    let path = out.join(MANIFEST_FILE);
    let mut bytes = fs::read(&path).unwrap();
    bytes[40] ^= 1;
    fs::write(&path, &bytes).unwrap();
    assert!(open(&out, Some(&vendor_key().public()), false).is_err());
    fs::remove_file(&path).unwrap();
    assert!(matches!(
        open(&out, None, false),
        Err(UpdateError::Io { .. })
    ));
}

#[test]
fn output_must_be_new_or_empty_and_outside_the_input() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    make_tree(&input);
    let vendor = vendor_key();

    let busy = tmp.path().join("busy");
    fs::create_dir(&busy).unwrap();
    fs::write(busy.join("keep.txt"), b"mine").unwrap();
    let err = build(&input, &vendor, &busy, &opts(None, false)).unwrap_err();
    assert!(matches!(err, UpdateError::Input(_)), "{err}");
    assert_eq!(fs::read(busy.join("keep.txt")).unwrap(), b"mine");

    let file = tmp.path().join("file");
    fs::write(&file, b"x").unwrap();
    assert!(matches!(
        build(&input, &vendor, &file, &opts(None, false)),
        Err(UpdateError::Input(_))
    ));

    let inside = input.join("release");
    assert!(matches!(
        build(&input, &vendor, &inside, &opts(None, false)),
        Err(UpdateError::Input(_))
    ));
    assert!(!inside.exists());

    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    build(&input, &vendor, &empty, &opts(None, false)).unwrap();
    open(&empty, Some(&vendor.public()), true).unwrap();
}

#[test]
fn bad_inputs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let vendor = vendor_key();
    let out = tmp.path().join("out");
    let empty = tmp.path().join("empty");
    fs::create_dir_all(empty.join("sub")).unwrap();
    let err = build(&empty, &vendor, &out, &opts(None, false)).unwrap_err();
    assert!(err.to_string().contains("holds no files"), "{err}");

    let input = tmp.path().join("input");
    make_tree(&input);
    for bad in [0, 63, 65, 100, MAX_BLOCK_SIZE + 64] {
        let err = build(&input, &vendor, &out, &opts(Some(bad), false)).unwrap_err();
        assert!(matches!(err, UpdateError::Input(_)), "{bad}: {err}");
    }
    let missing = tmp.path().join("missing");
    assert!(matches!(
        build(&missing, &vendor, &out, &opts(None, false)),
        Err(UpdateError::Io { .. })
    ));
    assert!(!out.exists());
}

#[cfg(unix)]
#[test]
fn symlinks_and_non_utf8_names_are_refused() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let vendor = vendor_key();
    let out = tmp.path().join("out");

    let linked = tmp.path().join("linked");
    make_tree(&linked);
    std::os::unix::fs::symlink("/etc/hostname", linked.join("a/secret")).unwrap();
    let err = build(&linked, &vendor, &out, &opts(None, false)).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");

    let odd = tmp.path().join("odd");
    make_tree(&odd);
    fs::write(odd.join(std::ffi::OsStr::from_bytes(b"bad\xffname")), b"x").unwrap();
    let err = build(&odd, &vendor, &out, &opts(None, false)).unwrap_err();
    assert!(err.to_string().contains("UTF-8"), "{err}");

    let backslash = tmp.path().join("backslash");
    make_tree(&backslash);
    fs::write(backslash.join("a\\b"), b"x").unwrap();
    assert!(matches!(
        build(&backslash, &vendor, &out, &opts(None, false)),
        Err(UpdateError::Input(_))
    ));
    assert!(!out.exists());
}

#[cfg(unix)]
#[test]
fn failed_build_leaves_nothing_behind() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    make_tree(&input);
    let locked = input.join("z/locked.deb");
    fs::write(&locked, b"secret").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    if File::open(&locked).is_ok() {
        return; // running as root: permissions do not stop the read, nothing to test here
    }
    let out = tmp.path().join("out");
    let err = build(&input, &vendor_key(), &out, &opts(None, false)).unwrap_err();
    assert!(matches!(err, UpdateError::Io { .. }), "{err}");
    assert!(err.to_string().contains("locked.deb"), "{err}");
    let left: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["input"], "no release and no temporary directory");
}

#[test]
fn staging_is_removed_unless_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("release");
    let staging = Staging::create(&out).unwrap();
    let path = staging.path.clone();
    fs::write(path.join(DATABASE_FILE), b"half").unwrap();
    drop(staging);
    assert!(!path.exists());
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);

    let staging = Staging::create(&out).unwrap();
    fs::write(staging.path.join(DATABASE_FILE), b"whole").unwrap();
    staging.commit(&out).unwrap();
    assert_eq!(fs::read(out.join(DATABASE_FILE)).unwrap(), b"whole");
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
}

#[test]
fn padded_block_counts() {
    assert_eq!(padded_block_count(0, 64, false), 1);
    assert_eq!(padded_block_count(0, 64, true), 1);
    assert_eq!(padded_block_count(1, 64, false), 1);
    assert_eq!(padded_block_count(64, 64, false), 1);
    assert_eq!(padded_block_count(65, 64, false), 2);
    assert_eq!(padded_block_count(5 * 64, 64, false), 5);
    assert_eq!(padded_block_count(5 * 64, 64, true), 8);
    assert_eq!(padded_block_count(3 * 64 + 1, 64, true), 4);
    assert_eq!(padded_block_count(8 * 64, 64, true), 8);
    assert_eq!(padded_block_count(8 * 64 + 1, 64, true), 16);
    assert_eq!(padded_block_count(u64::MAX, 64, true), 1 << 58);
}

#[test]
fn block_size_rule_cases() {
    assert_eq!(choose_block_size(&[], false).0, 64);
    assert_eq!(choose_block_size(&[0, 0], true).0, 64);
    // One file of exactly 1 MiB: no padding at the cap.
    assert_eq!(choose_block_size(&[1 << 20], false).0, 1 << 20);
    // Large files never go past 1 MiB (section 5.4).
    let (b, reason) = choose_block_size(&[10 << 20, 7 << 20], false);
    assert_eq!(b, 1 << 20);
    assert!(reason.contains("largest considered"), "{reason}");
    // 600 000 bytes: 128 KiB blocks pad by 55 360 bytes (9.2%), 256 KiB by 186 432 (31%).
    let (b, reason) = choose_block_size(&[600_000], false);
    assert_eq!(b, 131_072);
    assert!(
        reason.contains("9.2%") && reason.contains("31.1%"),
        "{reason}"
    );
    // Many tiny files pad by more than 10% even at 64 bytes.
    let (b, reason) = choose_block_size(&[100; 10], false);
    assert_eq!(b, 64);
    assert!(reason.contains("smallest"), "{reason}");
    // Size classes: 3 blocks of 64 KiB + 1 byte pads to 256 KiB whatever b is, so the block
    // size is free up to 256 KiB; without classes only 16 KiB stays within 10%.
    assert_eq!(choose_block_size(&[3 * 65_536 + 1], true).0, 262_144);
    assert_eq!(choose_block_size(&[3 * 65_536 + 1], false).0, 16_384);
}

proptest! {
    /// The chosen size keeps within the bound and the next power of two would not.
    #[test]
    fn block_size_rule_is_the_largest_within_bound(
        sizes in proptest::collection::vec(0u64..5_000_000, 1..20),
        classes in any::<bool>(),
    ) {
        let (b, _) = choose_block_size(&sizes, classes);
        prop_assert!(b.is_power_of_two() && (64..=1 << 20).contains(&b));
        let payload: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
        let padded = |b: usize| -> u128 {
            sizes.iter().map(|&s| u128::from(padded_block_count(s, b, classes)) * b as u128).sum()
        };
        let floor = if classes { padded(64) } else { payload };
        let within = |b: usize| padded(b) <= floor + payload / 10;
        if b > 64 {
            prop_assert!(within(b));
        }
        if b < 1 << 20 {
            prop_assert!(!within(2 * b));
        }
    }
}
