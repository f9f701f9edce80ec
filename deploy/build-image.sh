#!/usr/bin/env bash
# Builds the `pir` OCI image from deploy/Containerfile with no base image pulled.
#
#   deploy/build-image.sh BINARY [TAG]     (TAG defaults to localhost/pir:latest)
#
# Stages a root file system in a temporary directory: BINARY as /usr/local/bin/pir (debug
# information stripped when `strip` is present, which makes a debug build's image a tenth of
# the size), every shared library `ldd BINARY` lists at the same path, an empty /tmp; then runs
# `podman build` (or $CONTAINER_ENGINE, e.g. docker) on it. A statically linked BINARY gets no
# libraries. Prints the image tag last.
set -euo pipefail

binary=${1:?usage: deploy/build-image.sh BINARY [TAG]}
tag=${2:-localhost/pir:latest}
engine=${CONTAINER_ENGINE:-podman}
here=$(cd "$(dirname "$0")" && pwd)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/rootfs
mkdir -p "$root/usr/local/bin" "$root/tmp"
chmod 1777 "$root/tmp"
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug -o "$root/usr/local/bin/pir" "$binary"
else
  cp "$binary" "$root/usr/local/bin/pir"
fi
chmod 0755 "$root/usr/local/bin/pir"

# `ldd` prints "libx.so.1 => /lib/.../libx.so.1 (0x...)" and "/lib64/ld-linux-x86-64.so.2
# (0x...)"; copy every absolute path (following links: the image has the files themselves).
# "not a dynamic executable" (a static binary) lists nothing.
if ldd "$binary" >/dev/null 2>&1; then
  ldd "$binary" | grep -o '/[^ ]*' | sort -u | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
fi

cp "$here/Containerfile" "$stage/Containerfile"
"$engine" build --quiet -f "$stage/Containerfile" -t "$tag" "$stage" >/dev/null
echo "$tag"
