//! `pir release tune` on a tiny release: a row per size, sane numbers, a chart that is a PNG,
//! and a recommendation `pir release build --block-size` takes.

use super::*;

use crate::plot::tests::have_font;

fn options(min: usize, max: usize) -> TuneOptions {
    TuneOptions {
        min_block: min,
        max_block: max,
        rounds: Some(1),
        seconds: 0.0,
        size_classes: false,
    }
}

#[test]
fn a_tiny_release_gets_a_row_per_size_a_chart_and_a_block_size_release_build_takes() {
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..9_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let files: [(&str, &[u8]); 3] = [
        ("pool/a.deb", &big),
        ("pool/b.deb", &big[..2_500]),
        ("Packages", b"Package: a\n"),
    ];
    let (vendor, release) = pir_updates::sample::small_release(dir.path(), &files, 1024).unwrap();
    let bytes = release_files(&release).unwrap();
    assert_eq!(bytes.len(), 3);

    let mut seen = Vec::new();
    let rows = measure_all(&bytes, &options(1024, 8192), &mut |row| {
        seen.push(row.block_size)
    })
    .unwrap();
    let sizes: Vec<usize> = rows.iter().map(|r| r.block_size).collect();
    assert_eq!(sizes, [1024, 2048, 4096, 8192]);
    assert_eq!(seen, sizes, "progress told of every row");
    let useful: u64 = bytes.iter().map(|f| f.len() as u64).sum();
    for row in &rows {
        assert_eq!(row.fetches, 3, "one pass: every file once");
        assert_eq!(row.useful_bytes, useful);
        assert!(row.goodput.is_finite() && row.goodput > 0.0, "{row:?}");
        assert!(
            row.efficiency.is_finite() && row.efficiency > 0.0 && row.efficiency <= 1.0,
            "{row:?}"
        );
        assert!(row.query_bytes > 0 && row.answer_bytes >= useful, "{row:?}");
        assert_eq!(
            row.padding_bytes,
            row.blocks * row.block_size as u64 - useful,
            "{row:?}"
        );
        assert!(table_line(row).contains(&format!("{}K", row.block_size >> 10)));
    }
    // Bigger blocks pad the small files more: less efficient here.
    assert!(rows[3].efficiency < rows[0].efficiency, "{rows:?}");

    let pick = recommend(&rows).unwrap();
    assert!(sizes.contains(&pick));
    let best = rows.iter().map(|r| r.efficiency).fold(0.0, f64::max);
    let picked = rows.iter().find(|r| r.block_size == pick).unwrap();
    assert!(picked.efficiency >= best * (1.0 - EFFICIENCY_SLACK));
    let built = pir_updates::release::build(
        &dir.path().join("src"),
        &vendor,
        &dir.path().join("rebuilt"),
        &pir_updates::release::BuildOptions {
            block_size: Some(pick),
            ..pir_updates::release::BuildOptions::default()
        },
    )
    .unwrap();
    assert_eq!(built.block_size, pick);

    if !have_font() {
        return;
    }
    let png = dir.path().join("tune.png");
    plot(&png, &rows).unwrap();
    let image = std::fs::read(&png).unwrap();
    assert_eq!(&image[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&image[12..16], b"IHDR");
    assert!(image.len() > 4_000, "a chart with lines and text");
}

#[test]
fn the_recommendation_trades_goodput_only_within_the_efficiency_slack() {
    let row = |block_size, goodput, efficiency| TuneRow {
        block_size,
        blocks: 1,
        padding_bytes: 0,
        fetches: 1,
        useful_bytes: 1,
        query_bytes: 1,
        answer_bytes: 1,
        client_seconds: 0.0,
        mirror_seconds: 0.0,
        goodput,
        efficiency,
    };
    // 4K is fastest but far less efficient; 2K is within 10% of the best and faster than 1K.
    let rows = [
        row(1024, 1.0, 0.80),
        row(2048, 2.0, 0.75),
        row(4096, 9.0, 0.50),
    ];
    assert_eq!(recommend(&rows), Some(2048));
    assert_eq!(recommend(&[]), None);
    // A tie in goodput keeps the smaller (more efficient) size.
    assert_eq!(
        recommend(&[row(1024, 2.0, 0.8), row(2048, 2.0, 0.8)]),
        Some(1024)
    );
}

#[test]
fn block_sizes_are_powers_of_two_in_range() {
    assert_eq!(block_sizes(1024, 4096).unwrap(), [1024, 2048, 4096]);
    assert_eq!(block_sizes(1 << 10, 8 << 20).unwrap().len(), 14);
    for (min, max) in [(512, 4096), (1024, 16 << 20), (3000, 4096), (8192, 1024)] {
        assert!(block_sizes(min, max).is_err(), "{min}..{max}");
    }
}

/// The measurement of docs/benchmarks.md on a real release, through the code of `pir release
/// tune`: `PIR_TUNE_SRC=DIR cargo test -p pir-bench --lib tune::tests::real -- --ignored
/// --nocapture` builds DIR into a release with a new vendor key (in a temporary directory)
/// and prints the table; `PIR_TUNE_PLOT` names the chart (default tune.png).
#[test]
#[ignore = "minutes; run by hand with PIR_TUNE_SRC"]
fn real() {
    let src = std::path::PathBuf::from(std::env::var_os("PIR_TUNE_SRC").expect("PIR_TUNE_SRC"));
    let dir = tempfile::tempdir().unwrap();
    let vendor = pir_keys::SecretKey::generate().unwrap();
    let out = dir.path().join("release");
    let report = pir_updates::release::build(
        &src,
        &vendor,
        &out,
        &pir_updates::release::BuildOptions::default(),
    )
    .unwrap();
    println!(
        "release: {} files, {} bytes; pir release build's own rule: {}",
        report.files, report.payload_bytes, report.block_size_reason
    );
    let args = ReleaseTuneArgs {
        dir: out,
        min_block: MIN_TUNE_BLOCK,
        max_block: MAX_TUNE_BLOCK,
        seconds: 0.0,
        rounds: Some(1),
        size_classes: false,
        plot: std::env::var_os("PIR_TUNE_PLOT").map_or("tune.png".into(), Into::into),
        json: false,
    };
    run(&args).unwrap();
}
