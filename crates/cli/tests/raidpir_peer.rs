//! `benches/raidpir_peer.py`, the script that times RAID-PIR's C core next to `pir bench`: run
//! here against a stand-in module with the C core's calls and signatures (pure Python, a small
//! shape), since the real C extension is not vendored. Checks the script calls the peer as the
//! real core takes it, times both sides and reports their ratio, refuses a shape the core cannot
//! hold, and refuses a missing peer with a message that says what to do.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::path::Path;
use std::process::Command;

/// A Python module with the calls of RAID-PIR's `fastsimplexordatastore_c`, with the same
/// arguments as the C core's `PyArg_ParseTuple` formats: `Allocate` "ll" (block size a multiple
/// of 64), `SetData` "iLy#", `Produce_Xor_From_Bitstring` "iy#b" (bits, use_precomputed),
/// `Produce_Xor_From_Bitstrings` "iy#Ib", `DoPreprocessing` "i", `Deallocate` "i". A call with
/// other arguments raises `TypeError`, as the C core does.
const STAND_IN: &str = r#"
_stores = {}
def Allocate(block_size, blocks):
    if block_size % 64:
        raise ValueError("Block size must be a multiple of 64 byte")
    ds = len(_stores)
    _stores[ds] = [block_size, bytearray(block_size * blocks), False]
    return ds
def SetData(ds, offset, data):
    _stores[ds][1][offset:offset + len(data)] = data
def Produce_Xor_From_Bitstring(ds, bits, use_precomputed):
    size, data, preprocessed = _stores[ds]
    if use_precomputed and not preprocessed:
        raise ValueError("no precomputed table")
    out = bytearray(size)
    for i in range(len(data) // size):
        if bits[i // 8] >> (7 - i % 8) & 1:
            block = data[i * size:(i + 1) * size]
            out = bytearray(a ^ b for a, b in zip(out, block))
    return bytes(out)
def Produce_Xor_From_Bitstrings(ds, bits, numstrings, use_precomputed):
    step = len(bits) // numstrings
    return b"".join(
        Produce_Xor_From_Bitstring(ds, bits[k * step:(k + 1) * step], use_precomputed)
        for k in range(numstrings)
    )
def DoPreprocessing(ds):
    _stores[ds][2] = True
def Deallocate(ds):
    del _stores[ds]
"#;

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/raidpir_peer.py")
}

#[test]
fn the_peer_script_times_both_sides_at_one_shape() {
    if !support::require(
        Command::new("python3").arg("--version").output().is_ok(),
        "python3",
        "apt-get install python3",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let peer = dir.path().join("fastsimplexordatastore_c.py");
    std::fs::write(&peer, STAND_IN).unwrap();
    let out = Command::new("python3")
        .arg(script())
        .arg(&peer)
        .args(["--shape", "256x64-raid", "--runs", "3", "--json", "--pir"])
        .arg(env!("CARGO_BIN_EXE_pir"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["shape"], "256x64-raid");
    assert_eq!(report["peer_calls"]["xor"], "Produce_Xor_From_Bitstring");
    assert_eq!(report["peer_calls"]["preprocess"], "DoPreprocessing");
    assert_eq!(report["group"], 4, "the C core's table is fixed at t = 4");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        let ours = row["ours_ms"].as_f64().unwrap();
        let peer = row["raidpir_c_ms"].as_f64().unwrap();
        let ratio = row["ours_over_c"].as_f64().unwrap();
        assert!(ours > 0.0 && peer > 0.0, "{row}");
        assert!((ratio - ours / peer).abs() < 1e-9, "{row}");
    }

    // Blocks the C core cannot hold (not a multiple of 64 bytes) are refused by name.
    let out = Command::new("python3")
        .arg(script())
        .arg(&peer)
        .args(["--shape", "256x32", "--pir"])
        .arg(env!("CARGO_BIN_EXE_pir"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("multiple of 64"));

    // A module without the core's calls is refused, naming what it lacks.
    let other = dir.path().join("other.py");
    std::fs::write(&other, "def Allocate(block_size, blocks):\n    return 0\n").unwrap();
    let out = Command::new("python3")
        .arg(script())
        .arg(&other)
        .args(["--pir", env!("CARGO_BIN_EXE_pir")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Produce_Xor_From_Bitstring"));

    // No peer built: the script says so and what to do.
    let out = Command::new("python3")
        .arg(script())
        .arg(dir.path().join("missing.so"))
        .args(["--pir", env!("CARGO_BIN_EXE_pir")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("build RAID-PIR's C extension"));
}
