#!/usr/bin/env bash
# The fleet benchmark of issue #35 (`bench/run.sh fleet`): 20 distinct test images pushed to
# Debian's docker-registry on 127.0.0.1 under distinct tags (the test images share base
# layers), one Deployment each in a manifest folder, and `memlint lint --k8s` over the folder
# with an empty layer cache (cold) and a primed one (warm), against its bound: `gzip -dc` of
# every distinct layer blob once, plus the registry transfer (`skopeo copy` of every image to
# an OCI layout). Prints images per minute, the ratios, peak RSS with --parallel 1/2/4, and how
# many layers were read against how many are distinct (each shared layer once per run).
# Appends its table to bench/results.md.
#
#   bench/run.sh fleet          # RUNS=3 by default
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
RUNS=${RUNS:-3}
COUNT=${FLEET_IMAGES:-20}
CACHE=${MEMLINT_IMAGE_CACHE:-$ROOT/.cache}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memlint-fleet.XXXXXX")
trap 'kill "${REGISTRY_PID:-}" 2>/dev/null || true; rm -rf "$WORK"' EXIT

need() { command -v "$1" >/dev/null || { [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }
need skopeo skopeo
need docker-registry docker-registry
[ -x /usr/bin/time ] || need /usr/bin/time time
# ISA-L's vendored source (feature `isal`, as the Linux release build) builds with these.
need nasm nasm
need autoconf autoconf
need automake automake
need libtoolize libtool

cargo build --release --locked -q --features isal,zlib-ng
MEMLINT="$ROOT/target/release/memlint"

# The images: the first COUNT/2 test images for amd64 (not the benchmark's own, not arm64's),
# and a twin of each that differs only in its config (an env var set with umoci): 20 distinct
# images, each layer shared by two of them, as a fleet's images share their base layers.
mapfile -t BASES < <(scripts/build-image.sh --list | grep -v -e '^bench$' -e '^arm64' | head -n "$((COUNT / 2))")
declare -a NAMES LAYOUTS
mkdir -p "$WORK/twins"
for n in "${BASES[@]}"; do
  layout=$(scripts/build-image.sh "$n" | sed 's/^oci-dir://; s/:latest$//')
  NAMES+=("$n")
  LAYOUTS+=("$layout")
  skopeo copy -q "oci:$layout:latest" "oci:$WORK/twins/$n:latest"
  umoci config --image "$WORK/twins/$n:latest" --config.env "FLEET_TWIN=$n" >/dev/null
  NAMES+=("$n-twin")
  LAYOUTS+=("$WORK/twins/$n")
done

# The registry, on a free port of 127.0.0.1, storing in the work folder.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$WORK/registry.yml" <<EOF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $WORK/registry
http:
  addr: 127.0.0.1:$PORT
EOF
docker-registry serve "$WORK/registry.yml" >"$WORK/registry.log" 2>&1 &
REGISTRY_PID=$!
for _ in $(seq 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done
HOST="127.0.0.1:$PORT"

# Push each image under a tag of its own and write its Deployment.
mkdir -p "$WORK/manifests"
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]}
  skopeo copy -q --dest-tls-verify=false "oci:${LAYOUTS[$i]}:latest" "docker://$HOST/fleet/$name:v$i"
  cat >"$WORK/manifests/$name.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $name
spec:
  template:
    spec:
      containers:
        - name: app
          image: $HOST/fleet/$name:v$i
          resources:
            limits:
              memory: 512Mi
EOF
done

# The bound: every distinct layer blob unpacked once, plus the transfer of every image.
mapfile -t BLOBS < <(python3 - "${LAYOUTS[@]}" <<'PY'
import json, sys
seen = {}
for root in sys.argv[1:]:
    idx = json.load(open(f"{root}/index.json"))
    # umoci config adds the changed image to the index after the one it came from.
    m = json.load(open(f"{root}/blobs/sha256/" + idx["manifests"][-1]["digest"].split(":")[1]))
    for l in m["layers"]:
        seen.setdefault(l["digest"], (f"{root}/blobs/sha256/" + l["digest"].split(":")[1], l["mediaType"]))
for path, media in seen.values():
    print(f"{media} {path}")
PY
)
TOTAL_LAYERS=$(python3 - "${LAYOUTS[@]}" <<'PY'
import json, sys
n = 0
for root in sys.argv[1:]:
    idx = json.load(open(f"{root}/index.json"))
    m = json.load(open(f"{root}/blobs/sha256/" + idx["manifests"][-1]["digest"].split(":")[1]))
    n += len(m["layers"])
print(n)
PY
)
export BLOBS_STR
BLOBS_STR=$(printf '%s\n' "${BLOBS[@]}")
unpack_all() {
  while read -r media path; do
    case "$media" in
      *gzip) gzip -dc "$path" >/dev/null ;;
      *zstd) zstd -dcq "$path" >/dev/null ;;
      *) cat "$path" >/dev/null ;;
    esac
  done <<<"$BLOBS_STR"
}
export -f unpack_all
export HOST WORK
transfer_all() {
  rm -rf "$WORK/copies"
  mkdir -p "$WORK/copies"
  for f in "$WORK"/manifests/*.yaml; do
    ref=$(awk '/image:/ {print $2}' "$f")
    skopeo copy -q --src-tls-verify=false "docker://$ref" "oci:$WORK/copies/$(basename "$f" .yaml):latest"
  done
}
export -f transfer_all

declare -A WALL RSS
measure() {
  local name=$1
  shift
  # --fail-on never: any exit but 0 is a failure of the run.
  /usr/bin/time -f "%e %M" -o "$WORK/time.out" "$@" >"$WORK/last.out" 2>"$WORK/last.err" || {
    echo "bench: '$name' failed: $*" >&2
    cat "$WORK/last.err" >&2
    exit 1
  }
  local out
  out=$(tail -n 1 "$WORK/time.out")
  WALL[$name]+="${out%% *} "
  RSS[$name]+="${out##* } "
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
t() { echo "${WALL[$1]}" | median; }
m() { echo "${RSS[$1]}" | median; }
ratio() { awk -v a="$(t "$1")" -v b="$(t "$2")" 'BEGIN { printf "%.2f", a / b }'; }
# Layers read (not served by the cache) in the last run, from `-v`'s per-image lines.
layers_read() { sed -n 's/.* layers\{0,1\}: \([0-9]*\) read.*/\1/p' "$WORK/last.err" | awk '{s += $1} END {print s + 0}'; }

# The command line of one fleet run, for --parallel P with the layer cache in CACHE-DIR.
LINT=("$MEMLINT" lint -v --k8s "$WORK/manifests" --insecure-registry "$HOST" --fail-on never --format json)
READ_COLD=""
for run in $(seq "$RUNS"); do
  echo "fleet run $run of $RUNS" >&2
  for p in 1 2 4; do
    rm -rf "$WORK/cache"
    measure "cold, --parallel $p" "${LINT[@]}" --parallel "$p" --cache-dir "$WORK/cache"
    [ "$p" = 2 ] && READ_COLD+="$(layers_read) "
  done
  measure "warm, --parallel 2" "${LINT[@]}" --parallel 2 --cache-dir "$WORK/cache"
  READ_WARM=$(layers_read)
  measure "gzip -dc of the distinct layers (bound)" bash -c unpack_all
  measure "skopeo copy of every image (bound)" bash -c transfer_all
done
# One image of the fleet read alone from the same registry, as each of the fleet's is.
SINGLE_RSS=$(/usr/bin/time -f "%M" "$MEMLINT" lint --no-cache --insecure-registry "$HOST" --fail-on never "$HOST/fleet/${NAMES[0]}:v0" 2>&1 >/dev/null | tail -n 1)
BOUND=$(awk -v a="$(t "gzip -dc of the distinct layers (bound)")" -v b="$(t "skopeo copy of every image (bound)")" 'BEGIN { printf "%.2f", a + b }')
{
  echo
  echo "## Fleet (bench/run.sh fleet)"
  echo
  echo "Machine: $(nproc) cores, $(date -u +%Y-%m-%d). ${#NAMES[@]} images from docker-registry on 127.0.0.1, $TOTAL_LAYERS layers of which ${#BLOBS[@]} distinct; medians of $RUNS runs."
  echo
  echo "| what | wall | peak RSS |"
  echo "|---|---|---|"
  for k in "cold, --parallel 1" "cold, --parallel 2" "cold, --parallel 4" "warm, --parallel 2" \
           "gzip -dc of the distinct layers (bound)" "skopeo copy of every image (bound)"; do
    printf '| %s | %.2f s | %s MiB |\n' "$k" "$(t "$k")" "$(( $(m "$k") / 1024 ))"
  done
  echo
  echo "| ratio | value | target |"
  echo "|---|---|---|"
  echo "| images per minute, cold --parallel 2 | $(awk -v n="${#NAMES[@]}" -v s="$(t "cold, --parallel 2")" 'BEGIN { printf "%.0f", n * 60 / s }') | – |"
  echo "| cold --parallel 2 / bound ($BOUND s) | $(awk -v a="$(t "cold, --parallel 2")" -v b="$BOUND" 'BEGIN { printf "%.2f", a / b }') | ≤ 1.2 |"
  echo "| warm / cold (--parallel 2) | $(ratio "warm, --parallel 2" "cold, --parallel 2") | ≤ 0.05 |"
  echo "| peak RSS, --parallel 4 / (4 × one image's $((SINGLE_RSS / 1024)) MiB + 16 MiB) | $(awk -v a="$(m "cold, --parallel 4")" -v b="$SINGLE_RSS" 'BEGIN { printf "%.2f", a / (4 * b + 16384) }') | ≤ 1 |"
  echo "| layers read, cold --parallel 2 (median) / distinct layers | $(echo "$READ_COLD" | median) / ${#BLOBS[@]} | equal: each shared layer read once |"
  echo "| layers read, warm | $READ_WARM | 0 |"
} | tee -a "$ROOT/bench/results.md"
