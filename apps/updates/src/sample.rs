//! A deterministic demo corpus: a "software release" shaped like a Debian package pool.
//!
//! The demo and the tests need a release whose file sizes look like real updates, because the
//! block-size rule (upPIR section 5.4) and size classes (appendix A) only show their worth on
//! a realistic spread: the paper's figure 3 shows most Linux packages between a few KiB and a
//! few hundred KiB, with a long tail of large ones. Sizes here are log-normal (median 16 KiB,
//! so most files fall between 1 KiB and 200 KiB), plus 4% tiny files (metapackages, up to
//! 512 bytes) and 2% large ones (512 KiB to 2 MiB); 300 files come to roughly 15 to 20 MiB.
//!
//! [`small_release`] is the other kind of release tests need: a few files of known bytes.
//!
//! Randomness is ChaCha20 seeded with `seed` ([`ChaCha20Rng::seed_from_u64`]); stream 0 draws
//! names and sizes, stream 1 the file contents in name order, so the same seed always gives
//! byte-identical files on every platform. The contents are pseudo-random bytes, not packages.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use pir_keys::SecretKey;

use crate::{release, UpdateError};

/// Number of files in the demo release.
pub const DEMO_FILE_COUNT: usize = 300;

/// ChaCha20 stream that draws names and sizes.
const LAYOUT_STREAM: u64 = 0;
/// ChaCha20 stream that draws file contents.
const CONTENT_STREAM: u64 = 1;

/// Median size of an ordinary package, in bytes.
const MEDIAN_SIZE: f64 = 16.0 * 1024.0;
/// Standard deviation of the natural log of an ordinary package's size.
const LOG_SIGMA: f64 = 1.2;
/// Largest file in the corpus.
const MAX_SIZE: u64 = 2 << 20;

/// Library stems (`lib<stem>`), as found in a Debian archive.
const LIB_STEMS: &[&str] = &[
    "ssl",
    "curl",
    "xml2",
    "png",
    "jpeg",
    "z",
    "bz2",
    "lzma",
    "zstd",
    "ffi",
    "uuid",
    "blkid",
    "mount",
    "acl",
    "attr",
    "cap",
    "pam",
    "audit",
    "selinux",
    "gnutls",
    "nss",
    "krb5",
    "ldap",
    "sasl2",
    "ssh",
    "idn2",
    "pcre2",
    "sqlite3",
    "glib2",
    "dbus",
    "systemd",
    "udev",
    "gtk3",
    "qt5core",
    "python3",
    "perl",
    "ruby",
    "tcl",
    "ncurses",
    "readline",
    "expat",
    "yaml",
    "json-c",
    "icu",
    "harfbuzz",
    "freetype",
    "fontconfig",
    "cairo",
    "pango",
    "pixman",
    "x11",
    "xcb",
    "wayland",
    "drm",
    "gl1-mesa",
    "vulkan",
    "pulse",
    "asound",
    "gstreamer",
    "avahi",
    "cups",
    "tiff",
    "webp",
    "gif",
    "exif",
    "archive",
    "magic",
    "gmp",
    "mpfr",
    "nettle",
    "gcrypt",
    "gpg-error",
    "assuan",
    "ksba",
    "tasn1",
    "p11-kit",
    "seccomp",
    "apparmor",
    "bpf",
    "elf",
    "dw",
    "unwind",
];

/// Program packages.
const TOOLS: &[&str] = &[
    "openssl",
    "curl",
    "wget",
    "coreutils",
    "bash",
    "dash",
    "grep",
    "sed",
    "tar",
    "gzip",
    "xz-utils",
    "openssh",
    "sudo",
    "apt",
    "dpkg",
    "systemd",
    "util-linux",
    "e2fsprogs",
    "iproute2",
    "iptables",
    "nftables",
    "bind9",
    "postfix",
    "nginx",
    "apache2",
    "vim",
    "nano",
    "git",
    "python3.11",
    "perl",
    "ruby3.1",
    "tzdata",
    "ca-certificates",
    "firefox-esr",
    "thunderbird",
    "gimp",
    "inkscape",
    "libreoffice",
    "linux-image",
    "gcc-12",
    "binutils",
    "make",
    "cmake",
    "rsync",
    "cron",
    "logrotate",
    "rsyslog",
    "chrony",
    "samba",
    "bluez",
    "network-manager",
    "pulseaudio",
    "xserver-xorg",
    "ffmpeg",
    "vlc",
    "emacs",
    "tmux",
    "zsh",
    "htop",
    "strace",
    "gdb",
    "valgrind",
];

/// Writes a deterministic sample release of `files` files under `dir` (created if needed) and
/// returns each file's relative name and size, sorted by name (the order a release packs them).
pub fn write_sample_release(
    dir: &Path,
    files: usize,
    seed: u64,
) -> Result<Vec<(String, u64)>, UpdateError> {
    let layout = sample_layout(files, seed);
    let mut content = ChaCha20Rng::seed_from_u64(seed);
    content.set_stream(CONTENT_STREAM);
    let mut chunk = vec![0u8; 64 * 1024];
    for (name, size) in &layout {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(UpdateError::io_at(parent))?;
        }
        let io = UpdateError::io_at(&path);
        let mut out = BufWriter::new(File::create(&path).map_err(&io)?);
        let mut left = *size;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            content.fill_bytes(&mut chunk[..n]);
            out.write_all(&chunk[..n]).map_err(&io)?;
            left -= n as u64;
        }
        out.flush().map_err(&io)?;
    }
    Ok(layout)
}

/// A release of `files` (relative name, bytes) in blocks of `block_size` bytes, signed by a new
/// vendor key, for tests that need a small release of known bytes: the files are written under
/// `dir/src` and the release is built into `dir/release`. Returns the vendor key and the
/// release directory.
pub fn small_release(
    dir: &Path,
    files: &[(&str, &[u8])],
    block_size: usize,
) -> Result<(SecretKey, PathBuf), UpdateError> {
    let source = dir.join("src");
    for (name, bytes) in files {
        let path = source.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(UpdateError::io_at(parent))?;
        }
        fs::write(&path, bytes).map_err(UpdateError::io_at(&path))?;
    }
    let vendor = SecretKey::generate()?;
    let out = dir.join("release");
    let options = release::BuildOptions {
        block_size: Some(block_size),
        ..release::BuildOptions::default()
    };
    release::build(&source, &vendor, &out, &options)?;
    Ok((vendor, out))
}

/// Names and sizes of the sample release, sorted by name.
fn sample_layout(files: usize, seed: u64) -> Vec<(String, u64)> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    rng.set_stream(LAYOUT_STREAM);
    let mut seen = HashSet::with_capacity(files);
    let mut layout = Vec::with_capacity(files);
    for _ in 0..files {
        let mut name = package_path(&mut rng, None);
        let mut attempt = 0;
        while !seen.insert(name.clone()) {
            attempt += 1;
            // Collisions are rare; a rebuild suffix keeps the loop finite for any count.
            name = package_path(&mut rng, (attempt > 8).then_some(attempt));
        }
        layout.push((name, sample_size(&mut rng)));
    }
    layout.sort();
    layout
}

/// A path like `pool/main/libx/libxml2/libxml2-dev_2.9.14-2+deb12u1_amd64.deb`.
fn package_path(rng: &mut ChaCha20Rng, rebuild: Option<u32>) -> String {
    let (source, binary, arch) = if rng.random_bool(0.5) {
        let stem = LIB_STEMS[rng.random_range(0..LIB_STEMS.len())];
        let source = format!("lib{stem}");
        // Debian puts a '-' between a name ending in a digit and its soname version.
        let soname = rng.random_range(0..10);
        let sep = if stem.ends_with(|c: char| c.is_ascii_digit()) {
            "-"
        } else {
            ""
        };
        let (suffix, arch) = pick(rng, &[("", None), ("-dev", None), ("-doc", Some("all"))]);
        let binary = if suffix.is_empty() {
            format!("{source}{sep}{soname}")
        } else {
            format!("{source}{suffix}")
        };
        (source, binary, arch)
    } else {
        let tool = TOOLS[rng.random_range(0..TOOLS.len())];
        let (suffix, arch) = pick(
            rng,
            &[
                ("", None),
                ("-common", Some("all")),
                ("-doc", Some("all")),
                ("-utils", None),
            ],
        );
        (tool.to_owned(), format!("{tool}{suffix}"), arch)
    };
    let arch = arch.unwrap_or_else(|| {
        let roll = rng.random_range(0..10);
        match roll {
            0 => "arm64",
            1 => "i386",
            _ => "amd64",
        }
    });
    let mut version = format!(
        "{}.{}.{}-{}",
        rng.random_range(0..20),
        rng.random_range(0..30),
        rng.random_range(0..20),
        rng.random_range(1..6)
    );
    if rng.random_bool(0.3) {
        version.push_str(&format!("+deb12u{}", rng.random_range(1..5)));
    }
    if let Some(n) = rebuild {
        version.push_str(&format!("+b{n}"));
    }
    let prefix = if source.starts_with("lib") {
        &source[..4]
    } else {
        &source[..1]
    };
    format!("pool/main/{prefix}/{source}/{binary}_{version}_{arch}.deb")
}

/// One of `choices`, uniformly.
fn pick<T: Copy>(rng: &mut ChaCha20Rng, choices: &[T]) -> T {
    choices[rng.random_range(0..choices.len())]
}

/// A package size: mostly log-normal around [`MEDIAN_SIZE`], some tiny, a few large.
fn sample_size(rng: &mut ChaCha20Rng) -> u64 {
    let class: f64 = rng.random();
    if class < 0.04 {
        rng.random_range(0..=512)
    } else if class < 0.06 {
        rng.random_range(512 * 1024..=MAX_SIZE)
    } else {
        // Box-Muller: a standard normal from two uniforms (1 - u keeps ln away from 0).
        let u1: f64 = 1.0 - rng.random::<f64>();
        let u2: f64 = rng.random();
        let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let size = MEDIAN_SIZE * (LOG_SIGMA * normal).exp();
        (size as u64).clamp(600, MAX_SIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::check_file_name;

    fn hashes(dir: &Path, layout: &[(String, u64)]) -> Vec<[u8; 32]> {
        layout
            .iter()
            .map(|(name, _)| pir_keys::sha256(&fs::read(dir.join(name)).unwrap()))
            .collect()
    }

    #[test]
    fn same_seed_same_files() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let la = write_sample_release(a.path(), 40, 7).unwrap();
        let lb = write_sample_release(b.path(), 40, 7).unwrap();
        assert_eq!(la, lb);
        assert_eq!(hashes(a.path(), &la), hashes(b.path(), &lb));
        for (name, size) in &la {
            assert_eq!(fs::metadata(a.path().join(name)).unwrap().len(), *size);
        }
        // Another seed gives another release.
        assert_ne!(sample_layout(40, 8), la);
    }

    #[test]
    fn known_answer_layout() {
        // Pins the stream layout: changing how names or sizes are drawn changes the demo.
        let layout = sample_layout(DEMO_FILE_COUNT, 1);
        let digest = pir_keys::sha256(format!("{layout:?}").as_bytes());
        assert_eq!(
            hex::encode(digest),
            crate::testutil::SAMPLE_LAYOUT_KAT_SHA256
        );
    }

    #[test]
    fn names_are_debian_like_unique_and_valid() {
        let layout = sample_layout(DEMO_FILE_COUNT, 1);
        assert_eq!(layout.len(), DEMO_FILE_COUNT);
        let unique: HashSet<_> = layout.iter().map(|(n, _)| n).collect();
        assert_eq!(unique.len(), DEMO_FILE_COUNT);
        for (name, _) in &layout {
            check_file_name(name).unwrap();
            assert!(
                name.starts_with("pool/main/") && name.ends_with(".deb"),
                "{name}"
            );
            assert_eq!(name.matches('_').count(), 2, "{name}");
        }
    }

    #[test]
    fn size_spread_is_realistic() {
        for seed in [1, 2, 3] {
            let dir = tempfile::tempdir().unwrap();
            let layout = write_sample_release(dir.path(), DEMO_FILE_COUNT, seed).unwrap();
            let sizes: Vec<u64> = layout.iter().map(|&(_, s)| s).collect();
            let total: u64 = sizes.iter().sum();
            assert!(
                (10 << 20..=30 << 20).contains(&total),
                "seed {seed}: total {total}"
            );
            let typical = sizes
                .iter()
                .filter(|&&s| (1024..=200 * 1024).contains(&s))
                .count();
            assert!(
                typical * 100 >= 70 * sizes.len(),
                "seed {seed}: {typical} typical"
            );
            assert!(
                sizes.iter().any(|&s| s < 1024),
                "seed {seed}: no tiny files"
            );
            assert!(
                sizes.iter().any(|&s| s > 512 * 1024),
                "seed {seed}: no large files"
            );
            assert!(sizes.iter().all(|&s| s <= MAX_SIZE));
        }
    }
}
