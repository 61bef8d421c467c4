#!/usr/bin/env bash
# Runs every fuzz target (or those named after the time), one after the other, each for
# SECONDS (default 600). Seeds are read from seeds/TARGET; what the fuzzer finds goes to
# corpus/TARGET (its working corpus) and artifacts/TARGET (crashes), both ignored by git.
#
#   fuzz/run.sh 600                 # all targets, 10 minutes each
#   fuzz/run.sh 60 tar_merge elf    # two targets, a minute each
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(tar_merge elf ldcache json_facts reference go_buildinfo)
fi
# cargo fuzz passes nightly-only flags (-Zsanitizer=address); RUSTC_BOOTSTRAP lets the stable
# toolchain take them.
export RUSTC_BOOTSTRAP=1
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  start=$(date +%s)
  status=0
  cargo fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -max_len=262144 -timeout=20 || status=$?
  echo "$t: exit $status after $(( $(date +%s) - start )) s"
done
