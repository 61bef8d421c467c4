#!/usr/bin/env bash
# Installs the memlint binary that the GitHub Action (action.yml) runs, into $TOOL_ROOT/bin, a
# folder of this job's own under $RUNNER_TEMP.
#
# A release binary is run only when release-checksums.txt, in the action's own tree (the commit
# the workflow pinned), lists the sha256 of its release asset. The release is the `version` input
# (e.g. v0.2.0), else the release named by the action's ref when the table lists it, else the
# newest release the table lists. The asset is the one built for this runner
# (memlint-<version>-<target>.tar.gz, as .github/workflows/release.yml names them).
#
# - A listed asset is taken from the release cache ($MEMLINT_RELEASE_CACHE, by default
#   $RUNNER_TOOL_CACHE/memlint, kept across jobs on self-hosted runners) when the cached file
#   still has the listed sha256, else downloaded; either way its sha256 is checked against the
#   table before it is unpacked, and a mismatch of a download fails the step.
# - With no asset for this runner (another OS or architecture, a release without that asset, a
#   download that fails, or no release listed at all) memlint is built from the action's tree
#   with `cargo install --locked` into this job's own folder, never into a cache: `uses: ./` on a
#   pull request builds the pull request's code (with no `version` given, a local action always
#   builds its own tree).
# - A `version` the table does not list fails: the table cannot vouch for it, and building the
#   action's tree instead would run another version under that name.
#
# Environment: TOOL_ROOT, ACTION_PATH (required); ACTION_REF, ACTION_REPO, INPUT_VERSION,
# RUNNER_OS_NAME (Linux, macOS, Windows; default from uname), RUNNER_ARCH_NAME (X64, ARM64;
# default from uname), GH_TOKEN (sent to GitHub only), MEMLINT_RELEASE_BASE_URL (default
# https://github.com; the tests point it at a local server), MEMLINT_RELEASE_CACHE,
# RUNNER_TOOL_CACHE, RUNNER_TEMP (optional).
set -euo pipefail
: "${TOOL_ROOT:?TOOL_ROOT is not set}" "${ACTION_PATH:?ACTION_PATH is not set}"

# The token is for the download from GitHub only: kept in a shell variable, out of the
# environment of every command this script runs (`cargo install` runs build scripts of crates).
gh_token=${GH_TOKEN:-}
unset GH_TOKEN

# A workflow command's message with its data escaped as the runner reads it: an input cannot
# end the line and start a command of its own.
escape_data() {
  local s=$1
  s=${s//'%'/%25}
  s=${s//$'\r'/%0D}
  s=${s//$'\n'/%0A}
  printf '%s' "$s"
}
say() { echo "memlint: $*" >&2; }
fail() {
  echo "::error title=memlint install::$(escape_data "$*")" >&2
  exit 1
}

mkdir -p "$TOOL_ROOT/bin"
# Whatever is there already is not ours to trust.
rm -f "$TOOL_ROOT/bin/memlint"

work=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/memlint-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

build_from_source() {
  say "building memlint from the action's tree ($1) with cargo install --locked"
  cargo install --locked --force --path "$ACTION_PATH" --root "$TOOL_ROOT"
  exit 0
}

sha256_of() {
  if command -v sha256sum >/dev/null; then
    sha256sum "$1" | cut -d' ' -f1
  else
    shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

os=${RUNNER_OS_NAME:-}
if [ -z "$os" ]; then
  case "$(uname -s)" in
    Linux) os=Linux ;;
    Darwin) os=macOS ;;
    *) os=other ;;
  esac
fi
arch=${RUNNER_ARCH_NAME:-}
if [ -z "$arch" ]; then
  case "$(uname -m)" in
    x86_64 | amd64) arch=X64 ;;
    aarch64 | arm64) arch=ARM64 ;;
    *) arch=other ;;
  esac
fi
case "$os/$arch" in
  Linux/X64) target=x86_64-unknown-linux-gnu ;;
  Linux/ARM64) target=aarch64-unknown-linux-gnu ;;
  macOS/X64) target=x86_64-apple-darwin ;;
  macOS/ARM64) target=aarch64-apple-darwin ;;
  *) target="" ;;
esac

# The table: lines `SHA256 TAG ASSET`; `#` starts a comment; malformed lines are ignored.
table="$ACTION_PATH/release-checksums.txt"
listed="$work/listed"
if [ -f "$table" ]; then
  awk 'NF == 3 && length($1) == 64 && $1 !~ /[^0-9a-f]/ && $2 ~ /^v[0-9]/ { print }' "$table" >"$listed"
else
  : >"$listed"
fi
is_listed() { awk -v t="$1" '$2 == t { found = 1 } END { exit !found }' "$listed"; }

version=${INPUT_VERSION:-}
version=${version#v}
if [ -n "$version" ] && [ "$version" != latest ]; then
  # It goes into a URL and a file name: a version number and nothing else.
  [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] \
    || fail "version '${INPUT_VERSION}' is not a release version such as v0.2.0"
  tag="v$version"
  is_listed "$tag" \
    || fail "release-checksums.txt at this action ref lists no sha256 for memlint $tag, so its binary cannot be checked; pin the action to a ref that lists it, or leave 'version' empty"
elif [ -z "${ACTION_REF:-}" ] && [ -z "$version" ]; then
  build_from_source "a local action (uses: ./) builds its own code unless 'version' is given"
elif [ -n "${ACTION_REF:-}" ] && is_listed "$ACTION_REF"; then
  tag=$ACTION_REF
else
  tag=$(awk '{ print $2 }' "$listed" | sort -u -V | tail -n 1)
  [ -n "$tag" ] || build_from_source "release-checksums.txt lists no release"
fi

[ -n "$target" ] || build_from_source "no release binary is built for $os/$arch"
asset="memlint-${tag#v}-$target.tar.gz"
expected=$(awk -v t="$tag" -v a="$asset" '$2 == t && $3 == a { print $1; exit }' "$listed")
[ -n "$expected" ] || build_from_source "release-checksums.txt lists no $asset for $tag"

fetched="$work/$asset"
cache=${MEMLINT_RELEASE_CACHE:-}
if [ -z "$cache" ] && [ -n "${RUNNER_TOOL_CACHE:-}" ]; then
  cache="$RUNNER_TOOL_CACHE/memlint"
fi
from=""
if [ -n "$cache" ] && [ -f "$cache/$tag/$asset" ]; then
  # A private copy: what is checked is what is unpacked.
  cp "$cache/$tag/$asset" "$fetched"
  if [ "$(sha256_of "$fetched")" = "$expected" ]; then
    from="cache"
  else
    echo "::warning title=memlint install::the cached $asset does not have the sha256 release-checksums.txt lists; downloading it again" >&2
    rm -f "$fetched" "$cache/$tag/$asset"
  fi
fi

if [ -z "$from" ]; then
  base=${MEMLINT_RELEASE_BASE_URL:-https://github.com}
  base=${base%/}
  repo=${ACTION_REPO:-memlint/memlint}
  [[ "$repo" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] || fail "unexpected action repository '$repo'"
  url="$base/$repo/releases/download/$tag/$asset"
  curl_config="$work/curl.config"
  {
    echo 'fail'
    echo 'location'
    echo 'silent'
    echo 'show-error'
    echo 'retry = 3'
    echo 'connect-timeout = 20'
    echo 'max-time = 300'
    case "$base" in
      https://*) echo 'proto = "=https"' && echo 'proto-redir = "=https"' ;;
    esac
    # The token goes to GitHub and nowhere else (curl drops it on a redirect to another host).
    if [ -n "$gh_token" ] && [ "$base" = https://github.com ]; then
      printf 'header = "Authorization: Bearer %s"\n' "$gh_token"
    fi
  } >"$curl_config"
  if ! curl --config "$curl_config" --output "$fetched" "$url"; then
    rm -f "$fetched"
    build_from_source "could not download $url"
  fi
  from="$url"
  actual=$(sha256_of "$fetched")
  if [ "$actual" != "$expected" ]; then
    fail "release asset $asset of $tag has sha256 $actual, but release-checksums.txt says $expected; refusing to run it"
  fi
fi

mkdir "$work/unpacked"
tar -xzf "$fetched" -C "$work/unpacked" memlint \
  || fail "$asset (sha256 $expected) holds no memlint binary"
[ -f "$work/unpacked/memlint" ] && [ ! -L "$work/unpacked/memlint" ] \
  || fail "memlint in $asset is not a regular file"
cp "$work/unpacked/memlint" "$TOOL_ROOT/bin/memlint"
chmod 0755 "$TOOL_ROOT/bin/memlint"

if [ -n "$cache" ] && [ "$from" != cache ]; then
  # Best effort: a cache that cannot be written costs a download next time, nothing more.
  if mkdir -p "$cache/$tag" 2>/dev/null && cp "$fetched" "$cache/$tag/.$asset.$$" 2>/dev/null; then
    mv -f "$cache/$tag/.$asset.$$" "$cache/$tag/$asset"
  fi
fi
say "release $tag ($asset, sha256 $expected, from $from)"
