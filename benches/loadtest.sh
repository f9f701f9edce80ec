#!/usr/bin/env bash
# The load table of the README: `pir loadtest` at 50, 200 and 1,000 clients against a mirror
# (`pir mirror serve`, 256 MiB of 4 KiB blocks, Chor queries) and a single-server database
# (`pir serve`, SimplePIR over 1 M records of 32 B) on 127.0.0.1, then once more at 200
# clients with abusive connections mixed in. Prints a Markdown table.
#
#   bash benches/loadtest.sh [SECONDS_PER_RUN]      (default 10)
#
# Data is generated from a fixed seed. Client and servers share this machine, so the figures
# are what one box does with both; the servers' memory comes from their /metrics.
set -euo pipefail

run_seconds=${1:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --quiet --release -p pir-cli --manifest-path "$root/Cargo.toml"
pir="$root/target/release/pir"
dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

seeded() { # seeded BYTES SEED > file
  python3 -c "
import random, sys
r, left = random.Random($2), $1
while left:
    n = min(left, 1 << 20)
    sys.stdout.buffer.write(r.randbytes(n))
    left -= n
"
}

mkdir -p "$dir/src"
seeded $((256 << 20)) 1 > "$dir/src/data.bin"
seeded $((32 << 20)) 2 > "$dir/records.bin"
"$pir" keygen --out "$dir/vendor" > /dev/null
"$pir" keygen --out "$dir/m0" > /dev/null
"$pir" keygen --out "$dir/s0" > /dev/null
"$pir" release build "$dir/src" --key "$dir/vendor.key" --out "$dir/release" \
  --block-size 4096 --quiet > /dev/null
"$pir" db build --records "$dir/records.bin" --record-size 32 --out "$dir/records.db" > /dev/null

wait_for() { # wait_for LOG
  for _ in $(seq 1 600); do
    grep -q "https://" "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  echo "server did not start: $(cat "$1")" >&2
  exit 1
}

"$pir" mirror serve --release "$dir/release" --key "$dir/m0.key" --listen 127.0.0.1:18701 \
  --header-timeout-seconds 5 --body-timeout-seconds 5 > "$dir/mirror.log" 2>&1 &
pids+=($!)
"$pir" serve --db "$dir/records.db" --key "$dir/s0.key" --listen 127.0.0.1:18702 --quiet \
  --header-timeout-seconds 5 --body-timeout-seconds 5 > "$dir/serve.log" 2>&1 &
pids+=($!)
wait_for "$dir/mirror.log"
wait_for "$dir/serve.log"

cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo "CPU: $cpu, $(nproc) cores; $run_seconds s per run; client and servers on one machine"
echo
echo "| server | clients | abuse | served/s | p50 ms | p99 ms | p99.9 ms | errors | server RSS before / peak / after |"
echo "|---|---|---|---|---|---|---|---|---|"
row() { # row NAME KIND PORT KEY CLIENTS [--abuse]
  local json
  json=$("$pir" loadtest --server "https://127.0.0.1:$3=$4" --kind "$2" --clients "$5" \
    --seconds "$run_seconds" ${6:-} --json)
  python3 - "$1" "$5" "${6:-}" <<EOF
import json, sys
r = json.loads('''$json''')
mib = lambda b: "?" if b is None else f"{b / 2**20:.0f}"
rss = r["server_rss_bytes"]
abuse = "no"
if r["abuse"]:
    a = r["abuse"]
    abuse = (f"yes: slowloris {a['slowloris_closed']} cut, idle {a['idle_closed']} cut, "
             f"100 MB {a['big_body_413']}x 413, trickle {a['trickle_408']}x 408, "
             f"malformed {a['malformed_4xx']}x 4xx")
lat = r["latency_ms"]
print(f"| {sys.argv[1]} | {sys.argv[2]} | {abuse} | {r['throughput_per_s']:.0f} | {lat['p50']:.1f} | "
      f"{lat['p99']:.1f} | {lat['p999']:.1f} | {r['errors']} | "
      f"{mib(rss['before'])} / {mib(rss['peak'])} / {mib(rss['after'])} MiB |")
EOF
}
for clients in 50 200 1000; do
  row "mirror, 256 MiB, Chor" mirror 18701 "$dir/m0.pub" "$clients"
done
row "mirror, 256 MiB, Chor" mirror 18701 "$dir/m0.pub" 200 --abuse
for clients in 50 200 1000; do
  row "pir serve, SimplePIR 1 M x 32 B" lattice 18702 "$dir/s0.pub" "$clients"
done
row "pir serve, SimplePIR 1 M x 32 B" lattice 18702 "$dir/s0.pub" 200 --abuse
