#!/usr/bin/env python3
"""Times RAID-PIR's own C core next to `pir bench`, at the same shape, in one run.

RAID-PIR (Daniel Demmler, Amir Herzberg and Thomas Schneider, "RAID-PIR: Practical
Multi-Server PIR", CCSW 2014) answers queries in a C extension for Python,
`fastsimplexordatastore_c`, built from its repository's `fastsimplexordatastore.c`. It is not
vendored here: build it outside this repository (for example from ../shared/peers/raidpir,
copied to a temporary directory, `python3 setup.py build_ext --inplace`) and pass the built
file (a `.so`) to this script.

    python3 benches/raidpir_peer.py PATH/TO/fastsimplexordatastore_c.cpython-311-x86_64-linux-gnu.so
        [--shape 1.07GB-4KiB-raid] [--runs 5] [--rounds 1] [--pir target/release/pir] [--backend avx2]

The module's calls, as RAID-PIR's C core defines them:
    Allocate(block_size, blocks) -> ds             block_size a multiple of 64
    SetData(ds, offset, bytes)
    Produce_Xor_From_Bitstring(ds, bits, use_precomputed) -> one block
                                                   use_precomputed: 0 plain XOR of the blocks
                                                   whose bit is set (first block = top bit of
                                                   the first byte), 1 from the table below
    DoPreprocessing(ds)                            four-Russians table, t = 4 (fixed)
    Deallocate(ds)                                 frees the blocks, not the table
Each round times `--runs` answers to random bit strings with the peer's plain XOR and, after
its preprocessing, from its table (medians; the two answers to one bit string must agree, or the
script stops). The peer runs in a child process, so its memory (it never frees its table) is
returned before ours runs. Then `pir bench --threads 1 --json` times our plain and four-Russians
(t = 4) answers on the same shape. Both run one thread, on the same machine, in the same
invocation; with `--rounds N` the two alternate N times and each side's median over the rounds
is reported, with the ratio ours / C and the CPU model.
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

# RAID-PIR's C core fixes the four-Russians group size (`blocks_per_group = 4; // do not change!`).
PEER_GROUP = 4

CALLS = ("Allocate", "SetData", "Produce_Xor_From_Bitstring", "DoPreprocessing", "Deallocate")


def parse_shape(name):
    if name in SHAPES:
        return SHAPES[name]
    m = re.fullmatch(r"(\d+)x(\d+)(-raid)?", name)
    if not m:
        sys.exit(f"unknown shape {name!r}: use one of {', '.join(SHAPES)} or BLOCKSxBYTES[-raid]")
    return int(m.group(1)), int(m.group(2))


def load_module(path):
    if not os.path.exists(path):
        sys.exit(
            f"{path}: no such file; build RAID-PIR's C extension first, outside this repository "
            "(see --help)"
        )
    name = os.path.basename(path).split(".")[0]
    if path.endswith(".py"):
        loader = importlib.machinery.SourceFileLoader(name, path)
    else:
        loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    missing = [c for c in CALLS if not callable(getattr(module, c, None))]
    if missing:
        have = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        sys.exit(
            f"{path} is not RAID-PIR's fastsimplexordatastore_c: it lacks {', '.join(missing)} "
            f"(it has: {', '.join(have)})"
        )
    return module


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def time_peer(module, blocks, block_size, runs, seed):
    """One round of the peer: fill, plain answers, preprocessing, table answers (ms)."""
    rng = random.Random(seed)
    ds = module.Allocate(block_size, blocks)
    chunk = max(1, (16 << 20) // block_size)
    for first in range(0, blocks, chunk):
        count = min(chunk, blocks - first)
        data = rng.randbytes(count * block_size)
        for i in range(count):
            module.SetData(ds, (first + i) * block_size, data[i * block_size:(i + 1) * block_size])
    queries = [rng.randbytes((blocks + 7) // 8) for _ in range(runs + 1)]

    def answer(bits, use_precomputed):
        started = time.perf_counter()
        out = module.Produce_Xor_From_Bitstring(ds, bits, use_precomputed)
        elapsed = time.perf_counter() - started
        if len(out) != block_size:
            sys.exit(f"the peer answered {len(out)} bytes, expected {block_size}")
        return elapsed, out

    results = {}
    plain = [answer(bits, 0) for bits in queries]  # the first is a warm-up
    results["plain"] = statistics.median(t for t, _ in plain[1:]) * 1e3
    started = time.perf_counter()
    module.DoPreprocessing(ds)
    results["preprocessing_s"] = time.perf_counter() - started
    table = [answer(bits, 1) for bits in queries]
    for (_, by_scan), (_, by_table) in zip(plain, table):
        if by_scan != by_table:
            sys.exit("the peer's plain and four-Russians answers to one query differ")
    results["four-russians"] = statistics.median(t for t, _ in table[1:]) * 1e3
    module.Deallocate(ds)
    return results


def run_peer_child(args, seed):
    """Runs one peer round in a child process (the peer never frees its table)."""
    command = [sys.executable, os.path.abspath(__file__), args.peer, "--peer-only",
               "--shape", args.shape, "--runs", str(args.runs), "--seed", str(seed)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the peer failed: {done.stderr.strip() or done.stdout.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_ours(args):
    command = [args.pir, "bench", "--shape", args.shape, "--modes", "plain,four-russians",
               "--threads", "1", "--runs", str(args.runs), "--group", str(PEER_GROUP), "--json"]
    if args.backend:
        command += ["--backend", args.backend]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    ours, backend = {}, None
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
    return ours, backend


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("peer", help="RAID-PIR's built C extension (.so), or a .py module with the same calls")
    parser.add_argument("--shape", default="1.07GB-4KiB-raid")
    parser.add_argument("--runs", type=int, default=5, help="answers timed per side and round")
    parser.add_argument("--rounds", type=int, default=1, help="peer and ours alternate this many times")
    parser.add_argument("--pir", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "pir"))
    parser.add_argument("--backend", help="our kernel backend (portable, avx2, avx512)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--peer-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=2026, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runs < 1 or args.rounds < 1:
        sys.exit("--runs and --rounds must be at least 1")
    blocks, block_size = parse_shape(args.shape)
    if block_size % 64:
        sys.exit(f"RAID-PIR's C core takes blocks of a multiple of 64 bytes; {args.shape} has {block_size}")
    module = load_module(args.peer)
    if args.peer_only:
        print(json.dumps(time_peer(module, blocks, block_size, args.runs, args.seed)))
        return
    if not os.access(args.pir, os.X_OK):
        sys.exit(f"{args.pir}: not built; run `cargo build --release -p pir-cli` or pass --pir")

    peer_rounds, our_rounds, backend = [], [], None
    for round_ in range(args.rounds):
        peer_rounds.append(run_peer_child(args, args.seed + round_))
        ours, backend = run_ours(args)
        our_rounds.append(ours)

    def median(rounds, mode):
        values = [r[mode] for r in rounds if r.get(mode) is not None]
        return statistics.median(values) if values else None

    rows = []
    for mode in ("plain", "four-russians"):
        ours, peer = median(our_rounds, mode), median(peer_rounds, mode)
        rows.append({
            "mode": mode,
            "ours_ms": ours,
            "raidpir_c_ms": peer,
            "ours_over_c": ours / peer if ours is not None and peer else None,
        })
    report = {
        "cpu": cpu_model(),
        "backend": backend,
        "shape": args.shape,
        "runs": args.runs,
        "rounds": args.rounds,
        "group": PEER_GROUP,
        "peer_preprocessing_s": median(peer_rounds, "preprocessing_s"),
        "peer_calls": {"xor": "Produce_Xor_From_Bitstring", "preprocess": "DoPreprocessing"},
        "rows": rows,
    }
    if args.json:
        print(json.dumps(report))
        return
    print(f"CPU: {report['cpu']}; our backend {backend}; one thread; {args.shape}; "
          f"median of {args.runs} runs, {args.rounds} round(s); four Russians t = {PEER_GROUP}")
    print(f"{'mode':<15} {'ours ms':>9} {'RAID-PIR C ms':>14} {'ours / C':>9}")
    for row in rows:
        fmt = lambda v, d: "-" if v is None else f"{v:.{d}f}"
        print(f"{row['mode']:<15} {fmt(row['ours_ms'], 2):>9} {fmt(row['raidpir_c_ms'], 2):>14} {fmt(row['ours_over_c'], 2):>9}")
    print(f"peer preprocessing (t = {PEER_GROUP}): {report['peer_preprocessing_s']:.1f} s")


if __name__ == "__main__":
    main()
