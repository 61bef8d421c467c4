# Go recipes: programs built here with Debian's golang-go (and gcc for cgo) from the sources in
# testdata/recipes/go/, with no module download (GOPROXY=off: the module proxy is not
# reachable). cgo-sqlite/app requires github.com/mattn/go-sqlite3 through a `replace` to the
# local folder cgo-sqlite/sqlite3, whose go.mod declares that module path, so the program's
# build info names go-sqlite3 as a real build would; the stand-in calls C's malloc.

# go_program "CREATED_BY" SRC DEST CGO [musl] : builds testdata/recipes/go/SRC with
# CGO_ENABLED=CGO into DEST; with `musl`, linked by musl-gcc against musl's loader.
go_program() {
  local by=$1 src=$2 dest=$3 cgo=$4 libc=${5:-glibc} stage
  command -v go >/dev/null || die "install golang-go (and gcc) first"
  local cc=gcc ldflags=
  if [ "$libc" = musl ]; then
    command -v musl-gcc >/dev/null || die "install musl-tools first"
    cc=musl-gcc
    ldflags="-linkmode external -extldflags -Wl,--dynamic-linker=/lib/ld-musl-x86_64.so.1"
  fi
  # Headers and libraries of Debian packages unpacked by go_sysroot, for cgo to build against.
  local cflags="" libs=""
  if [ -n "${GO_SYSROOT:-}" ]; then
    cflags="-I$GO_SYSROOT/usr/include"
    libs="-L$GO_SYSROOT/usr/lib/$(triplet "$ARCH")"
  fi
  stage=$(new_stage)
  mkdir -p "$stage/$(dirname "$dest")" "$WORK/gopath"
  (cd "$ROOT/testdata/recipes/go/$src" &&
    CGO_CFLAGS=$cflags CGO_LDFLAGS=$libs CC=$cc CGO_ENABLED=$cgo GOPROXY=off GOFLAGS=-mod=mod GOPATH="$WORK/gopath" \
      GOCACHE="$CACHE/go-build" go build -trimpath -buildvcs=false -ldflags "$ldflags" \
      -o "$stage/$dest" .) >&2 ||
    die "go build of $src failed"
  commit_stage "$stage" "$by"
}

# A cgo program that uses (a stand-in of) github.com/mattn/go-sqlite3, on Debian 12's glibc.
go_cgo_sqlite() {
  ARCH=amd64
  debian_glibc
  go_program "COPY --from=build /out/cgoapp /usr/local/bin/cgoapp" cgo-sqlite/app usr/local/bin/cgoapp 1
}

# The cgo program is the entrypoint; no arena cap: go-cgo-glibc-allocator fires.
recipe_go_cgo_sqlite() {
  go_cgo_sqlite
  config --config.cmd=cgoapp
}

# The same with MALLOC_ARENA_MAX=2: the fixed twin.
recipe_go_cgo_sqlite_capped() {
  go_cgo_sqlite
  config --config.env=MALLOC_ARENA_MAX=2 --config.cmd=cgoapp
}

# A pure Go program built with CGO_ENABLED=0 (static, no libc) as the entrypoint, beside the
# cgo program in a PATH folder that the entrypoint does not run.
recipe_go_nocgo() {
  go_cgo_sqlite
  go_program "COPY --from=build /out/server /app/server" nocgo app/server 0
  config --config.entrypoint=/app/server
}

# The cgo program linked against musl, on a musl root: musl has no per-thread arenas, so
# go-cgo-glibc-allocator stays silent.
recipe_go_cgo_sqlite_musl() {
  ARCH=amd64
  musl_root
  go_program "COPY --from=build /out/cgoapp /usr/local/bin/cgoapp" cgo-sqlite/app usr/local/bin/cgoapp 1 musl
  config --config.cmd=/usr/local/bin/cgoapp
}

# go_sysroot PKG... : unpacks Debian packages (headers, .so links) into $WORK/sysroot, outside
# the image, and points go_program's cgo at it.
go_sysroot() {
  local deb
  mkdir -p "$WORK/sysroot"
  for deb in $(fetch_debs "$ARCH" "$@"); do
    dpkg-deb -x "$deb" "$WORK/sysroot"
  done
  GO_SYSROOT="$WORK/sysroot"
}

# A cgo program linked against Debian's shared libsqlite3 (DT_NEEDED libsqlite3.so.0, no Go
# module naming SQLite), with libsqlite3-0 installed: go-cgo-glibc-allocator fires through the
# library the program needs.
recipe_go_cgo_libsqlite() {
  ARCH=amd64
  debian_glibc
  debs "libsqlite3-0" libsqlite3-0
  go_sysroot libsqlite3-dev libsqlite3-0
  go_program "COPY --from=build /out/app /usr/local/bin/app" cgo-libsqlite usr/local/bin/app 1
  GO_SYSROOT=
  config --config.cmd=app
}
