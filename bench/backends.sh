#!/usr/bin/env bash
# The gzip inflate backends of issue #35 on a whole read: zlib-rs (the default build), zlib-ng
# (`--features zlib-ng`) and ISA-L (`--features isal`), each a `cargo build --release` of its
# own, running `memlint lint --no-cache` on the one-layer bench image (the 1.6 GB of files of
# bench/run.sh in a single gzip layer) on one core and on all cores, alternating. CPU seconds
# (user + sys, `/usr/bin/time`) rather than wall time: the machine is shared, and CPU time moves
# less with what else runs. Prints a Markdown table of medians of RUNS runs (5 by default) and
# appends it to bench/results.md.
#
#   bench/backends.sh
#   BUILD=0 bench/backends.sh   # the binaries a run before built (kept in the target folder)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RUNS=${RUNS:-5}
CACHE=${MEMLINT_IMAGE_CACHE:-$ROOT/.cache}
WORK="$CACHE/bench"
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN="$TARGET_DIR/backends"
mkdir -p "$WORK" "$BIN"
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null

OCI=$(scripts/build-image.sh bench | sed 's/^oci-dir://; s/:latest$//')
ONE="$WORK/one-layer"
[ -f "$ONE/index.json" ] || python3 bench/images.py one-layer "$OCI" "$ONE"
ONE_LAYER=$(python3 - "$ONE" <<'PY'
import json, sys
root = sys.argv[1]
idx = json.load(open(f"{root}/index.json"))
m = json.load(open(f"{root}/blobs/sha256/" + idx["manifests"][0]["digest"].split(":")[1]))
print(f"{root}/blobs/sha256/" + m["layers"][0]["digest"].split(":")[1])
PY
)

# name:features; each binary is kept in the target folder, so that the runs alternate.
VARIANTS=("zlib-rs:" "zlib-ng:zlib-ng" "isal:isal")
for v in "${VARIANTS[@]}"; do
  name=${v%%:*} features=${v#*:}
  [ "${BUILD:-1}" = 0 ] && [ -x "$BIN/memlint-$name" ] && continue
  echo "building $name" >&2
  cargo build --release --locked -q ${features:+--features "$features"}
  cp "$TARGET_DIR/release/memlint" "$BIN/memlint-$name"
done

declare -A CPU WALL RSS
measure() { # NAME COMMAND...
  local name=$1
  shift
  /usr/bin/time -f '%U %S %e %M' -o "$BIN/time.out" "$@" >/dev/null 2>&1 || {
    echo "bench: '$name' failed: $*" >&2
    exit 1
  }
  read -r user sys wall rss < <(tail -n 1 "$BIN/time.out")
  CPU[$name]+="$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }') "
  WALL[$name]+="$wall "
  RSS[$name]+="$rss "
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

for run in $(seq "$RUNS"); do
  echo "run $run of $RUNS" >&2
  for v in "${VARIANTS[@]}"; do
    name=${v%%:*}
    measure "$name, 1 core" taskset -c 0 "$BIN/memlint-$name" lint --no-cache --fail-on never --jobs 1 "oci-dir:$ONE"
    measure "$name, all cores" "$BIN/memlint-$name" lint --no-cache --fail-on never "oci-dir:$ONE"
  done
  measure "gzip -dc of the layer" gzip -dc "$ONE_LAYER"
done

{
  echo
  echo "Inflate backends (bench/backends.sh):"
  echo
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d)"
  echo "One-layer image ($(( $(wc -c <"$ONE_LAYER") / 1048576 )) MiB gzip layer), \`memlint lint --no-cache\`; medians of $RUNS runs"
  echo
  echo "| what | CPU (user + sys) | wall | peak RSS |"
  echo "|---|---|---|---|"
  for k in "zlib-rs, 1 core" "zlib-ng, 1 core" "isal, 1 core" "zlib-rs, all cores" "zlib-ng, all cores" "isal, all cores" "gzip -dc of the layer"; do
    printf '| %s | %s s | %s s | %s MiB |\n' "$k" "$(echo "${CPU[$k]}" | median)" "$(echo "${WALL[$k]}" | median)" "$(( $(echo "${RSS[$k]}" | median) / 1024 ))"
  done
} | tee -a "$ROOT/bench/results.md"
