#!/usr/bin/env python3
"""The capacity table of docs/capacity.md from the output of benches/loadtest_capacity.sh.

    python3 benches/capacity_table.py OUT_DIR

Usage models:
- Safe Browsing, the Checklist paper (Kogan and Corrigan-Gibbs 2021, section 7, one-week
  trace): an online lookup every 44 minutes and a state update every 94 minutes per user,
  taken over 24 hours (an upper bound: the trace is of working hours).
- Credential checks at HIBP's load: 6,700 checks a second on average, 42,000 at peak.

Cores: lookups a second x the servers' CPU seconds per lookup (both servers together, from
/proc/PID/stat over the knee step of `pir loadtest --knee`). Bandwidth: lookups a second x the
bytes the servers received and sent per lookup (their /metrics over the same step). Memory:
the server pairs needed at the knee's throughput x the pair's resident memory at its peak.
"""
import json
import math
import sys

LOOKUPS_PER_DAY = 24 * 60 / 44
UPDATES_PER_DAY = 24 * 60 / 94
HIBP = {"average": 6_700, "peak": 42_000}


def knee(path):
    with open(path) as f:
        data = json.load(f)
    return data["knee"] or data["steps"][0], data


def describe(r):
    lat = r["latency_ms"]
    b = r["server_bytes_per_lookup"]
    return (
        f"{r['rate_per_s']:.1f}/s offered, {r['throughput_per_s']:.1f}/s served, "
        f"p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, p99.9 {lat['p999']:.1f} ms, "
        f"errors {r['errors']}, server CPU {r['server_cpu_ms_per_lookup']:.2f} ms/lookup, "
        f"{b['received']:.0f} B in + {b['sent']:.0f} B out per lookup, "
        f"RSS peak {r['server_rss_bytes']['peak'] / 2**20:.0f} MiB (both servers)"
    )


def row(name, rate, r, note):
    cpu_s = r["server_cpu_ms_per_lookup"] / 1e3
    b = r["server_bytes_per_lookup"]
    per_lookup = b["received"] + b["sent"]
    cores = rate * cpu_s
    mbit = rate * per_lookup * 8 / 1e6
    pairs = max(1, math.ceil(rate / r["throughput_per_s"]))
    mem = pairs * r["server_rss_bytes"]["peak"] / 2**30
    return (
        f"| {name} | {rate:,.0f} | {cores:,.2f} | {mem:,.2f} GiB ({pairs} pair(s) x "
        f"{r['server_rss_bytes']['peak'] / 2**20:.0f} MiB) | {mbit:,.2f} Mbit/s "
        f"({rate * per_lookup * 86400 / 1e9:,.1f} GB/day) | {note} |"
    )


def main(out):
    print("| load | lookups/s | cores | memory | bandwidth | measurement |")
    print("|---|---|---|---|---|---|")
    sb_rate = 1e6 * LOOKUPS_PER_DAY / 86400
    for scheme in ["checklist", "dpf"]:
        r, _ = knee(f"{out}/sb-{scheme}-knee.json")
        print(row(f"Safe Browsing, 1 M daily users, {scheme} lookups", sb_rate, r,
                  f"sb-{scheme}-knee.json, knee step"))
    r, _ = knee(f"{out}/breach-knee.json")
    for label, rate in HIBP.items():
        print(row(f"credential checks, HIBP {label}", rate, r, "breach-knee.json, knee step"))
    print()
    print(f"Safe Browsing: {sb_rate:.1f} lookups/s and "
          f"{1e6 * UPDATES_PER_DAY / 86400:.1f} updates/s per million daily users")
    for name in ["sb-checklist-knee", "sb-dpf-knee", "breach-knee"]:
        r, data = knee(f"{out}/{name}.json")
        print(f"- {name}: {describe(r)}; next step broke: {data['broke']}")
    for policy in ["always", "never", "half"]:
        try:
            with open(f"{out}/flood-{policy}.json") as f:
                r = json.load(f)
        except FileNotFoundError:
            continue
        depth = [i["qdp_queue_depth"] for i in r["intervals"]]
        print(f"- flood {policy}: {describe(r)}; fallback scans {r['qdp_fallback_scans']}; "
              f"queue depth by interval {depth}")


if __name__ == "__main__":
    main(sys.argv[1])
