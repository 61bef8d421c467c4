#!/usr/bin/env bash
# The release-profile measurement behind Cargo.toml's [profile.dist] (bench/results.md,
# "Release profile"): builds memlint with each settings combination in its own target folder
# (so none invalidates another or the usual target/), then reports the binary's size (as built,
# stripped, and gzipped as in a release tarball) and the median CPU time (user + sys) and peak
# RSS of 5 runs of `memlint lint --no-cache --jobs 1` on three test images. CPU time rather than
# wall time: it holds on a machine shared with other work.
#
#   bench/profiles.sh            # all three; PROFILES="A C" for some
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/target/profiles}
mkdir -p "$OUT"

# NAME: what it is, then the cargo invocation (env overrides of the dist profile).
build() {
  case $1 in
    A) CARGO_TARGET_DIR="$OUT/A" cargo build --release --locked -q && echo "$OUT/A/release/memlint" ;;
    B) CARGO_TARGET_DIR="$OUT/B" CARGO_PROFILE_DIST_LTO=thin CARGO_PROFILE_DIST_CODEGEN_UNITS=16 \
         CARGO_PROFILE_DIST_PANIC=unwind cargo build --profile dist --locked -q && echo "$OUT/B/dist/memlint" ;;
    C) CARGO_TARGET_DIR="$OUT/C" cargo build --profile dist --locked -q && echo "$OUT/C/dist/memlint" ;;
  esac
}
describe() {
  case $1 in
    A) echo "release (today): no LTO, 16 codegen units, line tables, unwind" ;;
    B) echo "thin LTO, 16 codegen units, stripped, unwind" ;;
    C) echo "dist: fat LTO, 1 codegen unit, stripped, abort" ;;
  esac
}
images=(demo node-sharp dotnet-npgsql)
for img in "${images[@]}"; do scripts/build-image.sh "$img" >/dev/null; done

echo "| profile | build time | binary | stripped | .tar.gz | demo: CPU, RSS | node-sharp: CPU, RSS | dotnet-npgsql: CPU, RSS |"
echo "|---|---|---|---|---|---|---|---|"
for p in ${PROFILES:-A B C}; do
  start=$(date +%s)
  bin=$(build "$p")
  secs=$(( $(date +%s) - start ))
  strip -o "$OUT/$p.stripped" "$bin"
  row="| $p: $(describe "$p") | ${secs} s | $(( $(stat -c %s "$bin") / 1024 )) KiB | $(( $(stat -c %s "$OUT/$p.stripped") / 1024 )) KiB | $(( $(gzip -9 -c "$OUT/$p.stripped" | wc -c) / 1024 )) KiB |"
  for img in "${images[@]}"; do
    cpu=()
    for _ in 1 2 3 4 5; do
      /usr/bin/time -f "%U %S %M" -o "$OUT/time.out" "$bin" lint --no-cache --fail-on never --jobs 1 \
        "oci-dir:$ROOT/.cache/images/$img:latest" >/dev/null 2>&1
      read -r u s rss <"$OUT/time.out"
      cpu+=("$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')")
    done
    row+=" $(printf '%s\n' "${cpu[@]}" | sort -g | sed -n 3p) s, $((rss / 1024)) MiB |"
  done
  echo "$row"
done
