#!/usr/bin/env bash
# Builds container images from real Debian and npm packages, as OCI layouts, without a
# container engine: packages are fetched with `apt-get download` / `npm pack`, unpacked with
# `dpkg-deb -x` / tar, and stacked into layers with umoci. Each image is cached under
# $MEMLINT_IMAGE_CACHE (default .cache/ in the repo) and rebuilt only when its recipe changes.
#
#   scripts/build-image.sh NAME...   builds the named images, prints one oci-dir reference each
#   scripts/build-image.sh --list    lists the recipes
#
# Recipes are the functions named recipe_NAME in scripts/recipes.sh and scripts/recipes/*.sh (one
# file per runtime, so that rules of different runtimes add recipes without touching each other);
# files a recipe copies into an image live under testdata/dotnet, testdata/node or
# testdata/recipes/<topic>/.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${MEMLINT_IMAGE_CACHE:-$ROOT/.cache}
mkdir -p "$CACHE/debs" "$CACHE/npm" "$CACHE/images"

log() { printf '%s\n' "$*" >&2; }
die() { log "build-image: $*"; exit 1; }

# Debian architecture names and their multiarch triplets.
triplet() {
  case $1 in
    amd64) echo x86_64-linux-gnu ;;
    arm64) echo aarch64-linux-gnu ;;
    armhf) echo arm-linux-gnueabihf ;;
    ppc64el) echo powerpc64le-linux-gnu ;;
    s390x) echo s390x-linux-gnu ;;
    i386) echo i386-linux-gnu ;;
    *) die "no triplet for $1" ;;
  esac
}

# OCI architecture names for Debian's.
oci_arch() {
  case $1 in
    amd64 | arm64 | s390x | i386 | riscv64) [ "$1" = i386 ] && echo 386 || echo "$1" ;;
    armhf) echo arm ;;
    ppc64el) echo ppc64le ;;
    *) die "no OCI architecture for $1" ;;
  esac
}

ensure_tools() {
  local missing=()
  command -v umoci >/dev/null || missing+=(umoci)
  command -v dpkg-deb >/dev/null || missing+=(dpkg)
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "install ${missing[*]} first (apt-get install ${missing[*]})"
    log "installing ${missing[*]}"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  fi
}

# apt only downloads packages of architectures it has lists for.
ensure_arch() {
  local arch=$1 native
  native=$(dpkg --print-architecture)
  [ "$arch" = "$native" ] && return 0
  if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
    [ "$(id -u)" = 0 ] || die "run as root, or: dpkg --add-architecture $arch && apt-get update"
    log "adding architecture $arch to apt"
    dpkg --add-architecture "$arch"
    apt-get update -qq >&2
  fi
}

apt_updated=
# fetch_debs ARCH PKG... : downloads each package once into the cache; prints the .deb paths.
fetch_debs() {
  local arch=$1
  shift
  ensure_arch "$arch"
  local dir="$CACHE/debs/$arch" pkg f
  mkdir -p "$dir"
  for pkg in "$@"; do
    f=$(ls "$dir/${pkg}"_*_"$arch".deb "$dir/${pkg}"_*_all.deb 2>/dev/null | head -n 1 || true)
    if [ -z "$f" ]; then
      if [ -z "$apt_updated" ] && ! apt-cache show "$pkg:$arch" >/dev/null 2>&1; then
        [ "$(id -u)" = 0 ] && apt-get update -qq >&2
        apt_updated=1
      fi
      (cd "$dir" && apt-get download -qq -o APT::Sandbox::User=root "$pkg:$arch" >&2) || die "cannot download $pkg:$arch"
      f=$(ls "$dir/${pkg}"_*_"$arch".deb "$dir/${pkg}"_*_all.deb 2>/dev/null | head -n 1)
    fi
    printf '%s\n' "$f"
  done
}

# fetch_npm SPEC... : `npm pack` each package spec once; prints the .tgz paths.
fetch_npm() {
  local spec key f
  command -v npm >/dev/null || die "npm is needed for npm packages"
  for spec in "$@"; do
    key=$(printf '%s' "$spec" | tr '/@' '__')
    f="$CACHE/npm/$key.tgz"
    if [ ! -s "$f" ]; then
      local tmp
      tmp=$(mktemp -d)
      (cd "$tmp" && npm pack --silent "$spec" >/dev/null 2>&1) || die "cannot npm pack $spec"
      mv "$tmp"/*.tgz "$f"
      rm -rf "$tmp"
    fi
    printf '%s\n' "$f"
  done
}

# --- state of the image being built -------------------------------------------------------
IMG=        # OCI layout folder
ARCH=       # Debian architecture
WORK=       # scratch folder
ACC=        # every layer applied so far, to run ldconfig on and to keep dpkg's status whole

# usr_merge DIR : moves /bin, /sbin, /lib* into /usr as Debian 12's usrmerge does.
usr_merge() {
  local dir=$1 d
  for d in bin sbin lib lib32 lib64 libx32; do
    if [ -d "$dir/$d" ] && [ ! -L "$dir/$d" ]; then
      mkdir -p "$dir/usr/$d"
      cp -a "$dir/$d/." "$dir/usr/$d/"
      rm -rf "${dir:?}/$d"
    fi
  done
}

new_stage() {
  local s
  s=$(mktemp -d "$WORK/stage.XXXX")
  printf '%s\n' "$s"
}

# commit_stage STAGE CREATED_BY : adds STAGE as one layer and folds it into ACC.
commit_stage() {
  local stage=$1 by=$2
  umoci insert --rootless --image "$IMG:latest" --history.created_by "$by" "$stage" / >/dev/null
  cp -a "$stage/." "$ACC/"
  rm -rf "$stage"
}

# base_skeleton_musl : the first layer of a musl root: usrmerge links and an os-release.
base_skeleton_musl() {
  local stage
  stage=$(new_stage)
  mkdir -p "$stage/usr/bin" "$stage/usr/lib" "$stage/usr/local/bin" "$stage/var/lib/dpkg" "$stage/etc" "$stage/tmp"
  ln -s usr/bin "$stage/bin"
  ln -s usr/lib "$stage/lib"
  : >"$stage/var/lib/dpkg/status"
  commit_stage "$stage" "ADD musl-rootfs /"
}

# base : the first layer, a Debian 12 root with usrmerge links, base-files and libc-bin.
base() {
  local stage
  stage=$(new_stage)
  mkdir -p "$stage/usr/bin" "$stage/usr/sbin" "$stage/usr/lib" "$stage/var/lib/dpkg" "$stage/etc" "$stage/tmp"
  ln -s usr/bin "$stage/bin"
  ln -s usr/sbin "$stage/sbin"
  ln -s usr/lib "$stage/lib"
  if [ "$ARCH" = amd64 ]; then
    mkdir -p "$stage/usr/lib64"
    ln -s usr/lib64 "$stage/lib64"
  fi
  : >"$stage/var/lib/dpkg/status"
  commit_stage "$stage" "ADD debian-12-skeleton /"
  debs "base-files libc-bin" base-files libc-bin
}

# debs "CREATED_BY" PKG... : one layer holding these Debian packages, with dpkg's status
# and /etc/ld.so.cache brought up to date as the package scripts would.
debs() {
  local by=$1
  shift
  local stage deb list
  stage=$(new_stage)
  list=$(fetch_debs "$ARCH" "$@")
  for deb in $list; do
    dpkg-deb -x "$deb" "$stage"
    { dpkg-deb -f "$deb" Package Version Architecture Multi-Arch Source Depends Provides Description \
        | sed '/^Package:/a Status: install ok installed'; echo; } >>"$WORK/status.add"
  done
  usr_merge "$stage"
  mkdir -p "$stage/var/lib/dpkg"
  cat "$ACC/var/lib/dpkg/status" "$WORK/status.add" >"$stage/var/lib/dpkg/status"
  rm -f "$WORK/status.add"
  commit_stage "$stage" "RUN apt-get install -y $by"
  refresh_ld_cache
}

# refresh_ld_cache : runs ldconfig on the whole root and adds the new cache as a layer when it
# changed, as `apt-get install` of a library does. The host's ldconfig only reads libraries of
# its own architecture, so images of another one get no cache (their loader then searches the
# system folders, which the tests cover as well).
refresh_ld_cache() {
  [ "${LDCONFIG:-1}" = 1 ] || return 0
  [ -d "$ACC/etc" ] || return 0
  [ "$ARCH" = "$(dpkg --print-architecture)" ] || return 0
  local before=none after
  [ -f "$ACC/etc/ld.so.cache" ] && before=$(sha256sum <"$ACC/etc/ld.so.cache")
  ldconfig -X -r "$ACC" 2>/dev/null || return 0
  [ -f "$ACC/etc/ld.so.cache" ] || return 0
  after=$(sha256sum <"$ACC/etc/ld.so.cache")
  if [ "$before" != "$after" ]; then
    local stage
    stage=$(new_stage)
    mkdir -p "$stage/etc"
    cp "$ACC/etc/ld.so.cache" "$stage/etc/ld.so.cache"
    umoci insert --rootless --image "$IMG:latest" --history.created_by "RUN ldconfig" "$stage" / >/dev/null
    rm -rf "$stage"
  fi
}

# npm_modules DEST "CREATED_BY" SPEC... : unpacks npm tarballs as `npm install` lays them out
# under DEST/node_modules/NAME.
npm_modules() {
  local dest=$1 by=$2
  shift 2
  local stage tgz spec name
  stage=$(new_stage)
  for spec in "$@"; do
    tgz=$(fetch_npm "$spec")
    name=${spec%@*}
    [ -z "$name" ] && name=$spec
    mkdir -p "$stage/$dest/node_modules/$name"
    tar -xzf "$tgz" -C "$stage/$dest/node_modules/$name" --strip-components=1 --no-same-owner
  done
  commit_stage "$stage" "RUN npm install $by"
}

# musl_program "CREATED_BY" DEST : a small C program built with musl-gcc (Debian's musl-tools)
# at DEST, linked dynamically against musl as an Alpine program is.
musl_program() {
  local by=$1 dest=$2 stage
  if ! command -v musl-gcc >/dev/null; then
    [ "$(id -u)" = 0 ] || die "install musl-tools first"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >&2
  fi
  stage=$(new_stage)
  mkdir -p "$stage/$(dirname "$dest")"
  printf '%s\n' '#include <stdio.h>' '#include <stdlib.h>' \
    'int main(void) { void *p = malloc(64); puts(p ? "hello from musl" : "no memory"); free(p); return 0; }' >"$WORK/hello.c"
  musl-gcc -O2 -Wl,--dynamic-linker=/lib/ld-musl-x86_64.so.1 -o "$stage/$dest" "$WORK/hello.c"
  commit_stage "$stage" "$by"
}

# copy_from_deb "CREATED_BY" ARCH PKG FILE DEST : one file out of a Debian package, put where
# another distribution would have it.
copy_from_deb() {
  local by=$1 arch=$2 pkg=$3 file=$4 dest=$5 deb stage tmp
  deb=$(fetch_debs "$arch" "$pkg")
  tmp=$(mktemp -d "$WORK/deb.XXXX")
  dpkg-deb -x "$deb" "$tmp"
  stage=$(new_stage)
  mkdir -p "$stage/$(dirname "$dest")"
  cp -L "$tmp/$file" "$stage/$dest"
  rm -rf "$tmp"
  commit_stage "$stage" "$by"
}

# node_runtime VERSION : the official Node.js build (npm package node-linux-<cpu>) as the
# official images lay it out: /usr/local/bin/node and its headers' node_version.h.
node_runtime() {
  local version=$1 cpu stage tgz
  case $ARCH in
    amd64) cpu=x64 ;;
    arm64) cpu=arm64 ;;
    *) die "no Node.js package for $ARCH" ;;
  esac
  tgz=$(fetch_npm "node-linux-$cpu@$version")
  stage=$(new_stage)
  mkdir -p "$stage/usr/local"
  tar -xzf "$tgz" -C "$stage/usr/local" --strip-components=1 --no-same-owner \
    package/bin/node package/include/node/node_version.h
  commit_stage "$stage" "COPY node-v$version-linux-$cpu /usr/local"
}

# dotnet_runtime : the .NET runtime the PyPI wheel dotnetcore2 carries (a real Microsoft build
# of Microsoft.NETCore.App), laid out as the official images do under /usr/share/dotnet.
dotnet_runtime() {
  local whl stage
  mkdir -p "$CACHE/pip"
  whl=$(ls "$CACHE"/pip/dotnetcore2-3.1.23-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$whl" ]; then
    python3 -m pip download -q --no-deps -d "$CACHE/pip" dotnetcore2==3.1.23 >&2 || die "cannot download dotnetcore2"
    whl=$(ls "$CACHE"/pip/dotnetcore2-3.1.23-*.whl | head -n 1)
  fi
  stage=$(new_stage)
  mkdir -p "$stage/usr/share/dotnet" "$stage/usr/bin"
  python3 - "$whl" "$stage/usr/share/dotnet" <<'PY'
import os, stat, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith("dotnetcore2/bin/") or name.endswith("/"):
            continue
        out = os.path.join(dest, name[len("dotnetcore2/bin/"):])
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            dst.write(src.read())
        if name.endswith("/dotnet") or name.endswith(".so"):
            os.chmod(out, 0o755)
PY
  ln -s ../share/dotnet/dotnet "$stage/usr/bin/dotnet"
  commit_stage "$stage" "COPY dotnet-runtime-3.1.23 /usr/share/dotnet"
}

# repo_files "CREATED_BY" SRC=DEST... : files of this repository (app metadata fixtures) into a
# layer.
repo_files() {
  local by=$1 stage kv
  shift
  stage=$(new_stage)
  for kv in "$@"; do
    mkdir -p "$stage/$(dirname "${kv#*=}")"
    cp "$ROOT/${kv%%=*}" "$stage/${kv#*=}"
  done
  commit_stage "$stage" "$by"
}

# npm_manifest DEST "CREATED_BY" SPEC : only the package.json of an npm package, where
# `next build`'s standalone output traces it (DEST/node_modules/NAME/package.json).
npm_manifest() {
  local dest=$1 by=$2 spec=$3 tgz name stage
  tgz=$(fetch_npm "$spec")
  name=${spec%@*}
  stage=$(new_stage)
  mkdir -p "$stage/$dest/node_modules/$name"
  tar -xzf "$tgz" -C "$stage/$dest/node_modules/$name" --strip-components=1 --no-same-owner package/package.json
  commit_stage "$stage" "$by"
}

# files "CREATED_BY" PATH=CONTENT... : a layer of small text files.
files() {
  local by=$1
  shift
  local stage kv p
  stage=$(new_stage)
  for kv in "$@"; do
    p=${kv%%=*}
    mkdir -p "$stage/$(dirname "$p")"
    printf '%s' "${kv#*=}" >"$stage/$p"
  done
  commit_stage "$stage" "$by"
}

# symlink "CREATED_BY" LINK TARGET
symlink() {
  local stage
  stage=$(new_stage)
  mkdir -p "$stage/$(dirname "$2")"
  ln -s "$3" "$stage/$2"
  commit_stage "$stage" "$1"
}

# remove "CREATED_BY" PATH... : a layer of whiteouts.
remove() {
  local by=$1 p
  shift
  for p in "$@"; do
    umoci insert --rootless --image "$IMG:latest" --history.created_by "$by" --whiteout "$p" >/dev/null
    rm -rf "${ACC:?}/${p#/}"
  done
}

# config KEY=VALUE... : umoci config flags, e.g. config --config.env=LD_PRELOAD=...
config() {
  umoci config --image "$IMG:latest" "$@" >/dev/null
}

build() {
  local name=$1 recipe key out
  recipe="recipe_${name//-/_}"
  declare -F "$recipe" >/dev/null || die "no recipe '$name' (see --list)"
  # Any change to the recipes, this script or the repo files the images hold rebuilds them.
  key=$( {
    echo "$name"
    cat "$ROOT/scripts/recipes.sh" "${BASH_SOURCE[0]}"
    local d dirs=()
    for d in scripts/recipes testdata/dotnet testdata/node testdata/recipes; do
      [ -d "$ROOT/$d" ] && dirs+=("$ROOT/$d")
    done
    find "${dirs[@]}" -type f -print0 | sort -z | xargs -0 cat
  } | sha256sum | cut -c1-16)
  out="$CACHE/images/$name"
  if [ -f "$out/.recipe" ] && [ "$(cat "$out/.recipe")" = "$key" ]; then
    printf 'oci-dir:%s:latest\n' "$out"
    return 0
  fi
  log "building $name"
  rm -rf "$out"
  WORK=$(mktemp -d)
  ACC="$WORK/acc"
  mkdir -p "$ACC"
  IMG="$WORK/image"
  umoci init --layout "$IMG" >/dev/null
  umoci new --image "$IMG:latest" >/dev/null
  "$recipe"
  config --architecture "$(oci_arch "$ARCH")" --os linux --no-history
  umoci gc --layout "$IMG" >/dev/null
  rm -rf "$ACC"
  mv "$IMG" "$out"
  rm -rf "$WORK"
  printf '%s\n' "$key" >"$out/.recipe"
  printf 'oci-dir:%s:latest\n' "$out"
}

# shellcheck source=scripts/recipes.sh
. "$ROOT/scripts/recipes.sh"
for f in "$ROOT"/scripts/recipes/*.sh; do
  # shellcheck disable=SC1090
  [ -e "$f" ] && . "$f"
done

[ $# -gt 0 ] || die "usage: $0 NAME... | --list"
if [ "$1" = --list ]; then
  declare -F | awk '{print $3}' | sed -n 's/^recipe_//p' | tr _ -
  exit 0
fi
# One build at a time: tests run in parallel and share the package caches.
exec 9>"$CACHE/.lock"
flock 9
ensure_tools
for n in "$@"; do
  build "$n"
done
