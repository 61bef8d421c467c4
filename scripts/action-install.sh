#!/usr/bin/env bash
# Installs the memlint binary that the GitHub Action (action.yml) runs, into $TOOL_ROOT/bin, a
# folder of this job's own under $RUNNER_TEMP. Nothing is taken from a cache: a binary restored
# under a predictable cache key could have been planted by any workflow that can write caches.
# A release binary is used only when release-checksums.txt, in the action's own tree (the commit
# the workflow pinned), lists its sha256 for this ref; otherwise memlint is built from that tree.
#
# Environment: TOOL_ROOT, ACTION_PATH (required); ACTION_REF, ACTION_REPO, RUNNER_ARCH_NAME
# (X64 or ARM64), RUNNER_TEMP (optional).
set -euo pipefail
: "${TOOL_ROOT:?TOOL_ROOT is not set}" "${ACTION_PATH:?ACTION_PATH is not set}"

mkdir -p "$TOOL_ROOT/bin"
# Whatever is there already is not ours to trust.
rm -f "$TOOL_ROOT/bin/memlint"

case "${RUNNER_ARCH_NAME:-}" in
  X64) target=x86_64-unknown-linux-gnu ;;
  ARM64) target=aarch64-unknown-linux-gnu ;;
  *) target="" ;;
esac
asset="memlint-$target.tar.gz"
table="$ACTION_PATH/release-checksums.txt"

expected=""
if [ -n "$target" ] && [ -n "${ACTION_REF:-}" ] && [ -f "$table" ]; then
  # Lines: SHA256 REF ASSET; `#` starts a comment.
  expected=$(awk -v ref="$ACTION_REF" -v asset="$asset" \
    '$1 !~ /^#/ && $2 == ref && $3 == asset { print $1; exit }' "$table")
fi

if [ -n "$expected" ] && [ -n "${ACTION_REPO:-}" ]; then
  download=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/memlint-release.XXXXXX")
  if gh release download "$ACTION_REF" --repo "$ACTION_REPO" --pattern "$asset" --dir "$download"; then
    actual=$(sha256sum "$download/$asset" | cut -d' ' -f1)
    if [ "$actual" != "$expected" ]; then
      echo "::error title=memlint::release asset $asset of $ACTION_REF has sha256 $actual, but release-checksums.txt says $expected; refusing to run it" >&2
      rm -rf "$download"
      exit 1
    fi
    tar -xzf "$download/$asset" -C "$TOOL_ROOT/bin" memlint
    rm -rf "$download"
    echo "memlint: release $ACTION_REF ($asset, sha256 $actual)" >&2
    exit 0
  fi
  rm -rf "$download"
  echo "memlint: could not download $asset of $ACTION_REF; building from source" >&2
fi

cargo install --locked --path "$ACTION_PATH" --root "$TOOL_ROOT"
