#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (the S3-compatible object server the S3 store tests run against)
# from the Go module proxy into "${XDG_CACHE_HOME:-$HOME/.cache}/pir-ci/bin" when it is missing.
# `go install .../weed@VERSION` is refused (its go.mod has a replace directive), so the module is
# downloaded, copied out of the read-only module cache and built in place. Pinned version below;
# the binary is about 233 MB, several minutes to build on 2 cores, so it lives in the cache and
# never in the repository.
set -euo pipefail
VERSION="v0.0.0-20261109003541-7506e5f91cd6"
BIN_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/pir-ci/bin"
STAMP="$BIN_DIR/.weed-version"
if [ -x "$BIN_DIR/weed" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
export PATH="$PATH:/usr/local/go/bin"
mkdir -p "$BIN_DIR"
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
dir="$(cd "$work" && go mod download -json "github.com/seaweedfs/seaweedfs@$VERSION" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[ -n "$dir" ] || { echo "weed.sh: go mod download gave no Dir" >&2; exit 1; }
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
# -s -w: no symbol table or DWARF (Go's stack traces do not need them); less for the linker to
# write for a binary this size.
(cd "$work/src" && go build -ldflags='-s -w' -o "$BIN_DIR/weed.tmp" ./weed)
mv "$BIN_DIR/weed.tmp" "$BIN_DIR/weed"
echo "$VERSION" > "$STAMP"
