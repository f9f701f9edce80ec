#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 600) and reports executions and findings.
#
#   bash fuzz/run.sh [--quick-build] [SECONDS] [TARGET...]
#
# --quick-build (CI's smoke run) builds for compile speed rather than fuzzing speed: opt-level 1,
# no debug info and 16 codegen units per crate instead of cargo-fuzz's opt-level 3 and one unit.
# Long runs leave it out.
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`). Each
# target starts from a corpus seeded with the known-answer and fail_ vectors of tests/vectors
# (decoded from hex into a temporary directory, never committed) and keeps what it finds
# under fuzz/corpus/TARGET (ignored by git). A crash is written to fuzz/artifacts/TARGET and
# makes the script exit non-zero: add the input as a fail_ vector and fix the decoder.
set -uo pipefail
cd "$(dirname "$0")"
build=(-O)
if [ "${1:-}" = "--quick-build" ]; then
  shift
  build=(-O --codegen-units 16)
  export CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=false
fi
seconds="${1:-600}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build "${build[@]}" >/dev/null 2>&1 || cargo +nightly fuzz build "${build[@]}" || exit 1

seeds="$(mktemp -d)"
trap 'rm -rf "$seeds"' EXIT
# Every hex vector (lines that are not comments) becomes one seed input.
python3 - "$seeds" ../tests/vectors/*.hex ../tests/vectors/prologue/*.hex <<'PY'
import os, sys
out = sys.argv[1]
for path in sys.argv[2:]:
    text = "".join(l.strip() for l in open(path) if not l.startswith("#"))
    try:
        data = bytes.fromhex(text)
    except ValueError:
        continue
    name = os.path.basename(path)[:-4]
    open(os.path.join(out, name), "wb").write(data)
PY

failed=0
printf '%-20s %12s %10s  %s\n' target executions exec/s result
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target"
  log="$(mktemp)"
  extra=()
  # Hand-written seeds for targets whose inputs are text (config files): fuzz/seeds/TARGET.
  if [ -d "seeds/$target" ]; then extra=("seeds/$target"); fi
  cargo +nightly fuzz run "${build[@]}" "$target" "corpus/$target" "$seeds" "${extra[@]}" -- \
    -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1
  status=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  if [ "$status" -eq 0 ]; then
    result="no findings"
  else
    result="FINDING (see fuzz/artifacts/$target)"
    failed=1
    tail -30 "$log"
  fi
  printf '%-20s %12s %10s  %s\n' "$target" "${runs:-?}" "${speed:-?}" "$result"
  rm -f "$log"
done
exit "$failed"
