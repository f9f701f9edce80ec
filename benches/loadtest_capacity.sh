#!/usr/bin/env bash
# The measurements behind docs/capacity.md and the QDP section of docs/breach.md:
#   1. the knee of the two Safe Browsing servers (Checklist and DPF lookups) and of the two
#      breach servers (QDP checks): `pir loadtest --knee`, open loop, rate x1.5 per step;
#   2. a QDP flood for each pause policy (always, never, half): two breach servers started
#      with that policy, then `pir loadtest --kind breach --rate FLOOD` with the queue depth,
#      fallback full scans and latency sampled every 500 ms (JSON and CSV per policy).
#
#   bash benches/loadtest_capacity.sh OUT_DIR [SB_HOSTS] [BREACH_PASSWORDS] [FLOOD_RATE]
#     (defaults: 300000 hosts, 1000000 passwords, 1.3 x the breach knee's served rate;
#      FLOOD_SECONDS=20, STEP_SECONDS=5, QDP_QUEUE=200, FILL_SECONDS=5 in the environment)
#
# Then: python3 benches/capacity_table.py OUT_DIR
#
# Data is generated from a fixed seed. The load generator and the servers share this machine;
# CPU per lookup is the servers' own (from /proc/PID/stat), traffic and memory from their
# /metrics. Needs python3 and a built `pir` (PIR=..., default target/release/pir).
set -euo pipefail
out=${1:?give an output directory}
sb_hosts=${2:-300000}
passwords=${3:-1000000}
flood_rate=${4:-}
flood_seconds=${FLOOD_SECONDS:-20}
step_seconds=${STEP_SECONDS:-5}
qdp_queue=${QDP_QUEUE:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
pir=${PIR:-$root/target/release/pir}
[ -x "$pir" ] || { echo "build pir first: cargo build --release -p pir-cli" >&2; exit 1; }
mkdir -p "$out"
dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

wait_for() { # wait_for LOG
  for _ in $(seq 1 1200); do
    grep -q "https://" "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  echo "server did not start: $(cat "$1")" >&2
  exit 1
}
port_of() { grep -o 'https://127.0.0.1:[0-9]*' "$1" | head -1; }

for k in s0 s1; do "$pir" keygen --out "$dir/$k" > /dev/null; done
grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //' > "$out/cpu.txt"
nproc >> "$out/cpu.txt"

# Safe Browsing: SB_HOSTS random hosts, both servers, knee for Checklist then DPF lookups.
python3 -c "
import random
r = random.Random(1)
for i in range($sb_hosts):
    print('h%016x.example' % r.getrandbits(64))
" > "$dir/hosts.txt"
"$pir" safebrowsing build "$dir/hosts.txt" --out "$dir/sb.db" > "$out/sb-build.txt"
for s in 0 1; do
  "$pir" safebrowsing serve --db "$dir/sb.db" --server $s --key "$dir/s$s.key" \
    --listen 127.0.0.1:0 > "$dir/sb$s.log" 2>&1 &
  pids+=($!)
  eval "sb_pid$s=$!"
done
wait_for "$dir/sb0.log"
wait_for "$dir/sb1.log"
sb="--server $(port_of "$dir/sb0.log")=$dir/s0.pub --server $(port_of "$dir/sb1.log")=$dir/s1.pub"
for scheme in checklist dpf; do
  # shellcheck disable=SC2086
  "$pir" loadtest --kind safebrowsing --scheme $scheme $sb --rate 20 --knee \
    --seconds "$step_seconds" --interval-ms 1000 --server-pid "$sb_pid0" \
    --server-pid "$sb_pid1" --json > "$out/sb-$scheme-knee.json"
done
kill "$sb_pid0" "$sb_pid1"

# Breach: BREACH_PASSWORDS random passwords.
python3 -c "
import random
r = random.Random(2)
for i in range($passwords):
    print('%016x' % r.getrandbits(64))
" > "$dir/passwords.txt"
"$pir" breach build --format passwords "$dir/passwords.txt" --out "$dir/breach.db" --quiet \
  > "$out/breach-build.txt"
breach_servers() { # breach_servers POLICY: starts both, sets $breach and the pids
  for s in 0 1; do
    rm -f "$dir/seeds-$s" "$dir/.seeds-$s.witness"
    "$pir" breach serve --db "$dir/breach.db" --server $s --key "$dir/s$s.key" \
      --listen 127.0.0.1:0 --qdp-policy "$1" --qdp-queue "$qdp_queue" \
      --seed-state "$dir/seeds-$s" > "$dir/breach$s.log" 2>&1 &
    pids+=($!)
    eval "breach_pid$s=$!"
  done
  wait_for "$dir/breach0.log"
  wait_for "$dir/breach1.log"
  breach="--server $(port_of "$dir/breach0.log")=$dir/s0.pub"
  breach="$breach --server $(port_of "$dir/breach1.log")=$dir/s1.pub"
  # Let the precompute workers fill their queues first (a flood starts from a full queue).
  sleep "${FILL_SECONDS:-5}"
}
breach_servers half
# shellcheck disable=SC2086
"$pir" loadtest --kind breach $breach --rate 5 --knee --seconds "$step_seconds" \
  --interval-ms 1000 --server-pid "$breach_pid0" --server-pid "$breach_pid1" --json \
  > "$out/breach-knee.json"
kill "$breach_pid0" "$breach_pid1"

if [ -z "$flood_rate" ]; then
  flood_rate=$(python3 -c "
import json
d = json.load(open('$out/breach-knee.json'))
r = d['knee'] or d['steps'][0]
print(round(r['throughput_per_s'] * 1.3, 1))")
fi
for policy in always never half; do
  breach_servers "$policy"
  # shellcheck disable=SC2086
  "$pir" loadtest --kind breach $breach --rate "$flood_rate" --seconds "$flood_seconds" \
    --interval-ms 500 --server-pid "$breach_pid0" --server-pid "$breach_pid1" --json \
    --csv "$out/flood-$policy.csv" --plot "$out/flood-$policy.png" \
    --title "QDP flood at $flood_rate checks/s, --qdp-policy $policy --qdp-queue $qdp_queue" \
    > "$out/flood-$policy.json"
  kill "$breach_pid0" "$breach_pid1"
  sleep 1
done
echo "done: $out"
