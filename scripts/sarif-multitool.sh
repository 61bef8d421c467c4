#!/usr/bin/env bash
# Prints the path of Microsoft's SARIF Multitool (npm package @microsoft/sarif-multitool-linux,
# a self-contained Linux binary), fetching it once into the cache.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${MEMLINT_IMAGE_CACHE:-$ROOT/.cache}
dir="$CACHE/tools/sarif-multitool"
bin="$dir/package/Sarif.Multitool"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  exec 9>"$dir.lock"
  flock 9
  if [ ! -x "$bin" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent @microsoft/sarif-multitool-linux@5.7.0 >/dev/null)
    tar -xzf "$tmp"/*.tgz -C "$dir"
    rm -rf "$tmp"
    chmod +x "$bin"
  fi
fi
printf '%s\n' "$bin"
