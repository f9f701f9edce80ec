#!/usr/bin/env python3
"""Times RAID-PIR's own C core next to `pir bench`, at the same shape, in one run.

RAID-PIR (Demmler, Herzberg and Schneider, seed 001) answers queries in a C extension for
Python, `fastsimplexordatastore_c`, built from its repository's `fastsimplexordatastore.c`
(`python3 setup.py build_ext` there). It is not vendored here: build it yourself and pass the
built file (a `.so`) to this script.

    python3 benches/raidpir_peer.py PATH/TO/fastsimplexordatastore_c.cpython-311-x86_64-linux-gnu.so
        [--shape 1.07GB-4KiB-raid] [--runs 5] [--pir target/release/pir] [--backend avx2]

The script fills the peer's datastore with random blocks, times `--runs` answers to random
queries with the peer's XOR (medians), and if the module has a four-Russians preprocessing
call, times its answers again after it. It then runs `pir bench --threads 1 --json` with plain
and four-Russians rows on the same shape and prints both and their ratio (ours / C), with the
CPU model. Both run one thread, on the same machine, in the same invocation.

The extension's call names differ between upPIR and RAID-PIR versions, so they are looked up:
`Allocate(block_size, blocks)`, `SetData(ds, offset, bytes)`, one of
`Produce_Xor_From_Bitstring(ds, bits)` or `Produce_Xor_From_Bitstrings(ds, bits, 1)`, an
optional preprocessing call (`DoPreprocessing(ds)` or any name with "russian" or "preproc"),
and `Deallocate(ds)`. Give other names with --allocate, --set, --xor, --preprocess; the error
lists what the module has.
"""

import argparse
import importlib.machinery
import importlib.util
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

SHAPES = {
    "1.07GB-4KiB-raid": (1 << 18, 4096),
    "2^18x4KiB": (1 << 18, 4096),
    "1GiB-1MiB": (1 << 10, 1 << 20),
}


def parse_shape(name):
    if name in SHAPES:
        return SHAPES[name]
    m = re.fullmatch(r"(\d+)x(\d+)(-raid)?", name)
    if not m:
        sys.exit(f"unknown shape {name!r}: use one of {', '.join(SHAPES)} or BLOCKSxBYTES[-raid]")
    return int(m.group(1)), int(m.group(2))


def load_module(path):
    if not os.path.exists(path):
        sys.exit(f"{path}: no such file; build RAID-PIR's C extension first (see --help)")
    name = os.path.basename(path).split(".")[0]
    if path.endswith(".py"):
        loader = importlib.machinery.SourceFileLoader(name, path)
    else:
        loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def find(module, wanted, patterns, required=True):
    names = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
    if wanted:
        if wanted not in names:
            sys.exit(f"the module has no {wanted!r}; it has: {', '.join(names)}")
        return wanted
    for pattern in patterns:
        for n in names:
            if re.fullmatch(pattern, n, re.IGNORECASE):
                return n
    if required:
        sys.exit(
            f"no call matching {patterns} in the module (it has: {', '.join(names)}); "
            "name it with the matching flag"
        )
    return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def time_peer(module, names, blocks, block_size, runs, rng):
    ds = getattr(module, names["allocate"])(block_size, blocks)
    setter = getattr(module, names["set"])
    chunk = max(1, (16 << 20) // block_size)
    for first in range(0, blocks, chunk):
        count = min(chunk, blocks - first)
        data = rng.randbytes(count * block_size)
        for i in range(count):
            setter(ds, (first + i) * block_size, data[i * block_size:(i + 1) * block_size])
    xor = getattr(module, names["xor"])
    multi = names["xor"].lower().endswith("bitstrings")

    def answer():
        bits = rng.randbytes((blocks + 7) // 8)
        started = time.perf_counter()
        out = xor(ds, bits, 1) if multi else xor(ds, bits)
        elapsed = time.perf_counter() - started
        if len(out) != block_size:
            sys.exit(f"the peer answered {len(out)} bytes, expected {block_size}")
        return elapsed

    results = {}
    answer()  # warm-up
    results["plain"] = statistics.median(answer() for _ in range(runs)) * 1e3
    if names.get("preprocess"):
        getattr(module, names["preprocess"])(ds)
        answer()
        results["four-russians"] = statistics.median(answer() for _ in range(runs)) * 1e3
    if names.get("deallocate"):
        getattr(module, names["deallocate"])(ds)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peer", help="RAID-PIR's built C extension (.so), or a .py module with the same calls")
    parser.add_argument("--shape", default="1.07GB-4KiB-raid")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--group", type=int, default=4, help="our four-Russians group size t")
    parser.add_argument("--pir", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "pir"))
    parser.add_argument("--backend", help="our kernel backend (portable, avx2, avx512)")
    parser.add_argument("--allocate")
    parser.add_argument("--set")
    parser.add_argument("--xor")
    parser.add_argument("--preprocess")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    if args.runs < 1:
        sys.exit("--runs must be at least 1")
    blocks, block_size = parse_shape(args.shape)
    module = load_module(args.peer)
    if not os.access(args.pir, os.X_OK):
        sys.exit(f"{args.pir}: not built; run `cargo build --release -p pir-cli` or pass --pir")
    names = {
        "allocate": find(module, args.allocate, [r"allocate"]),
        "set": find(module, args.set, [r"setdata", r"set_?data"]),
        "xor": find(module, args.xor, [r"produce_xor_from_bitstring", r"produce_xor_from_bitstrings", r".*xor.*"]),
        "preprocess": find(module, args.preprocess, [r"dopreprocessing", r".*russian.*", r".*preproc.*"], required=False),
        "deallocate": find(module, None, [r"deallocate"], required=False),
    }
    rng = random.Random(2026)
    peer = time_peer(module, names, blocks, block_size, args.runs, rng)

    command = [args.pir, "bench", "--shape", args.shape, "--modes", "plain,four-russians",
               "--threads", "1", "--runs", str(args.runs), "--group", str(args.group), "--json"]
    if args.backend:
        command += ["--backend", args.backend]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    ours = {}
    backend = None
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if "mode" not in row:
            continue  # the machine line
        backend = row.get("backend")
        mode = "plain" if row["mode"] == "plain" else "four-russians"
        ours[mode] = row["median_ms"]
    report = {
        "cpu": cpu_model(),
        "backend": backend,
        "shape": args.shape,
        "runs": args.runs,
        "peer_calls": names,
        "rows": [
            {
                "mode": mode,
                "ours_ms": ours.get(mode),
                "raidpir_c_ms": peer.get(mode),
                "ours_over_c": (ours[mode] / peer[mode]) if mode in ours and mode in peer else None,
            }
            for mode in ("plain", "four-russians")
        ],
    }
    if args.json:
        print(json.dumps(report))
        return
    print(f"CPU: {report['cpu']}; our backend {backend}; one thread; {args.shape}; median of {args.runs}")
    print(f"{'mode':<15} {'ours ms':>9} {'RAID-PIR C ms':>14} {'ours / C':>9}")
    for row in report["rows"]:
        fmt = lambda v, d: "-" if v is None else f"{v:.{d}f}"
        print(f"{row['mode']:<15} {fmt(row['ours_ms'], 2):>9} {fmt(row['raidpir_c_ms'], 2):>14} {fmt(row['ours_over_c'], 2):>9}")


if __name__ == "__main__":
    main()
