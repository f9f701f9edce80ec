#!/usr/bin/env bash
# Fetching one typical package with the real apt through `pir` (3 loopback mirrors) against the
# same apt fetching it over plain http:// from the same machine.
#
#   bash benches/apt_fetch.sh [SIZE_MB] [RUNS]      (defaults: 1024 MB, 7 runs)
#
# The release holds real Debian packages (jq and its dependencies, hello; `apt-get download`)
# plus deterministic filler files (pool/filler/*.deb, ~200 KiB each, never indexed) up to
# SIZE_MB, built with `pir release build`. Each run deletes apt's archive cache and times
# `apt-get install --download-only -y jq` (jq + libjq1, ~200 KiB in all) through `pir://` and
# through `http://` (python3 -m http.server on the same repository). Prints the medians and the
# ratio. Needs: apt-get, dpkg-scanpackages, python3, a built `pir` (cargo build --release).
set -euo pipefail
SIZE_MB=${1:-1024}
RUNS=${2:-7}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PIR=${PIR:-$ROOT/target/release/pir}
[ -x "$PIR" ] || { echo "build pir first: cargo build --release -p pir-cli" >&2; exit 1; }
W=$(mktemp -d /tmp/pir-apt-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT

mkdir -p "$W/repo/pool" "$W/repo/pool/filler"
(cd "$W/repo/pool" && apt-get download -qq hello jq libjq1 libonig5 2>/dev/null)
(cd "$W/repo" && dpkg-scanpackages -m pool > Packages 2>/dev/null)
python3 - "$W/repo/pool/filler" "$SIZE_MB" <<'PY'
import os, random, sys
out, size_mb = sys.argv[1], int(sys.argv[2])
rng = random.Random(2026)
total, k = 0, 0
while total < size_mb << 20:
    n = int(rng.lognormvariate(12.2, 0.8))  # median ~200 KiB, like a security suite's .debs
    with open(os.path.join(out, f"filler{k:05d}.deb"), "wb") as f:
        f.write(rng.randbytes(n))
    total += n; k += 1
print(f"filler: {k} files, {total / 2**20:.0f} MiB", file=sys.stderr)
PY
"$PIR" keygen --out "$W/vendor" >/dev/null
urls=()
"$PIR" release build "$W/repo" --key "$W/vendor.key" --out "$W/release" --quiet
for i in 0 1 2; do
  "$PIR" keygen --out "$W/m$i" >/dev/null
  "$PIR" mirror serve --release "$W/release" --key "$W/m$i.key" --listen 127.0.0.1:0 > "$W/m$i.log" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do
  for _ in $(seq 600); do grep -q 'https://' "$W/m$i.log" && break; sleep 0.5; done
  urls+=("--mirror" "$(grep -o 'https://[0-9.:]*' "$W/m$i.log" | head -1)=$W/m$i.pub")
done
"$PIR" mirror-list build --vendor-key "$W/vendor.key" "${urls[@]}" --out "$W/mirrors.pir" >/dev/null
"$PIR" apt install-method --dir "$W/methods" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$W/repo" && exec python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)
sleep 1

run() { # $1 = source line; prints seconds of one download-only install
  local kind=$1 src=$2
  mkdir -p "$W/$kind/state/lists/partial" "$W/$kind/cache/archives/partial"
  echo "$src" > "$W/$kind/sources.list"
  local opts=(-o "Dir::State=$W/$kind/state" -o Dir::State::status=/var/lib/dpkg/status
    -o "Dir::Cache=$W/$kind/cache" -o "Dir::Etc::SourceList=$W/$kind/sources.list"
    -o Dir::Etc::SourceParts=/nonexistent -o Debug::NoLocking=1 -o "Dir::Bin::Methods=$W/methods"
    -o "Acquire::pir::MirrorList=$W/mirrors.pir" -o "Acquire::pir::VendorKey=$W/vendor.pub"
    -o "Acquire::pir::StateDir=$W/pirstate" -o APT::Sandbox::User=root)
  [ -f "$W/$kind/updated" ] || { apt-get "${opts[@]}" update -qq >/dev/null 2>&1; touch "$W/$kind/updated"; }
  rm -f "$W/$kind/cache/archives/"*.deb
  local t0 t1
  t0=$(date +%s.%N)
  apt-get "${opts[@]}" install --download-only -y -qq jq >/dev/null 2>&1
  t1=$(date +%s.%N)
  ls "$W/$kind/cache/archives/"jq_*.deb >/dev/null
  python3 -c "print($t1 - $t0)"
}
if [ -n "${HOLD:-}" ]; then # keep the set-up for experiments: HOLD=1 bash benches/apt_fetch.sh
  echo "holding: W=$W http port $port (Ctrl-C ends)"; sleep infinity
fi
pir_times=(); http_times=()
for _ in $(seq "$RUNS"); do
  pir_times+=("$(run pir 'deb [trusted=yes] pir://updates/ ./')")
  http_times+=("$(run http "deb [trusted=yes] http://127.0.0.1:$port/ ./")")
done
python3 - "${pir_times[*]}" "${http_times[*]}" "$SIZE_MB" <<'PY'
import statistics, sys, platform
p = [float(x) for x in sys.argv[1].split()]; h = [float(x) for x in sys.argv[2].split()]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
mp, mh = statistics.median(p), statistics.median(h)
print(f"CPU: {cpu}; release {sys.argv[3]} MB; {len(p)} runs of `apt-get install --download-only jq` (jq + libjq1)")
print(f"pir://  (3 loopback mirrors, RAID-PIR): median {mp*1e3:.0f} ms  (runs: {', '.join(f'{x*1e3:.0f}' for x in p)})")
print(f"http:// (python3 http.server):          median {mh*1e3:.0f} ms  (runs: {', '.join(f'{x*1e3:.0f}' for x in h)})")
print(f"ratio pir / http: {mp / mh:.2f}")
PY
