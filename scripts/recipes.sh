# Image recipes for scripts/build-image.sh, one function each: recipe_NAME builds image NAME.
# Each sets ARCH (Debian's name), then stacks layers with base, debs, npm_modules, files,
# symlink, remove, musl_program, copy_from_deb and config. Comments say what the image is for.

# Debian 12 with glibc and a shell.
debian_glibc() {
  base
  debs "libc6" gcc-12-base libgcc-s1 libc6
  debs "dash" dash
  symlink "RUN ln -s dash /bin/sh" usr/bin/sh dash
}

# Debian 12 with glibc, a shell and jemalloc (libjemalloc2 and its C++ runtime).
debian_jemalloc() {
  debian_glibc
  debs "libjemalloc2" libstdc++6 libjemalloc2
}

# The README's demo: jemalloc installed, but LD_PRELOAD names the arm64 multiarch folder on an
# amd64 image, the silent failure of ../shared/brief.md (Rule C).
recipe_demo() {
  ARCH=amd64
  debian_jemalloc
  config --config.env="LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2" --config.cmd=/bin/sh
}

# glibc, no preload: the libc's malloc is in effect.
recipe_glibc() {
  ARCH=amd64
  debian_glibc
  config --config.cmd=/bin/sh
}

# jemalloc preloaded by its full path: in effect.
recipe_glibc_jemalloc() {
  ARCH=amd64
  debian_jemalloc
  config --config.env="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" --config.cmd=/bin/sh
}

# jemalloc preloaded by bare name: found through /etc/ld.so.cache.
recipe_glibc_jemalloc_bare() {
  ARCH=amd64
  debian_jemalloc
  config --config.env="LD_PRELOAD=libjemalloc.so.2" --config.cmd=/bin/sh
}

# jemalloc installed, then removed by a later layer; the preload stayed.
recipe_glibc_jemalloc_removed() {
  ARCH=amd64
  debian_jemalloc
  remove "RUN apt-get purge -y libjemalloc2" /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
  config --config.env="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" --config.cmd=/bin/sh
}

# The preload names a symlink to the real library.
recipe_glibc_jemalloc_symlink() {
  ARCH=amd64
  debian_jemalloc
  symlink "RUN ln -s /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/local/lib/libjemalloc.so" \
    usr/local/lib/libjemalloc.so /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
  config --config.env="LD_PRELOAD=/usr/local/lib/libjemalloc.so" --config.cmd=/bin/sh
}

# jemalloc copied in without its C++ runtime: the preload opens, its DT_NEEDED do not resolve,
# and every program fails to start.
recipe_glibc_jemalloc_no_deps() {
  ARCH=amd64
  debian_glibc
  copy_from_deb "COPY libjemalloc.so.2 /usr/local/lib/" amd64 libjemalloc2 \
    usr/lib/x86_64-linux-gnu/libjemalloc.so.2 usr/local/lib/libjemalloc.so.2
  config --config.env="LD_PRELOAD=/usr/local/lib/libjemalloc.so.2" --config.cmd=/bin/sh
}

# arm64 image whose LD_PRELOAD names the amd64 folder.
recipe_arm64_jemalloc_amd64_path() {
  ARCH=arm64
  debian_jemalloc
  config --config.env="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" --config.cmd=/bin/sh
}

# arm64 image with jemalloc preloaded by the right path.
recipe_arm64_jemalloc() {
  ARCH=arm64
  debian_jemalloc
  config --config.env="LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2" --config.cmd=/bin/sh
}

# A musl image: Debian's musl as the only C library, the loader links Alpine has, and a program
# built with musl-gcc as the entrypoint.
musl_root() {
  base_skeleton_musl
  debs "musl" musl
  symlink "RUN ln -s ld-musl-x86_64.so.1 /lib/libc.musl-x86_64.so.1" usr/lib/libc.musl-x86_64.so.1 ld-musl-x86_64.so.1
  musl_program "COPY hello /usr/local/bin/hello" usr/local/bin/hello
}

recipe_musl() {
  ARCH=amd64
  musl_root
  config --config.cmd=/usr/local/bin/hello
}

# --- Node.js, sharp and Next.js ------------------------------------------------------------

NODE=22.12.0
SHARP=0.34.5
LIBVIPS=1.2.4

# Debian 12 with the official Node.js build and the C++ runtime it needs.
debian_node() {
  debian_glibc
  debs "libstdc++6" libstdc++6
  node_runtime "$NODE"
  files "COPY server.js /app/" "app/server.js=require('sharp'); require('http').createServer().listen(3000);"
}

# An app with sharp and its glibc addon for this architecture, as `npm ci` installs them.
sharp_app() {
  local cpu=x64
  [ "$ARCH" = arm64 ] && cpu=arm64
  npm_modules app "sharp@$SHARP" "sharp@$SHARP" "@img/sharp-linux-$cpu@$SHARP" "@img/sharp-libvips-linux-$cpu@$LIBVIPS" "detect-libc@2.1.2" "semver@7.7.3"
}

# sharp on glibc malloc: sharp-glibc-allocator fires.
recipe_node_sharp() {
  ARCH=amd64
  debian_node
  sharp_app
  config --config.env=NODE_VERSION=$NODE --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# The fixed twin: jemalloc installed and preloaded.
recipe_node_sharp_jemalloc() {
  ARCH=amd64
  debian_node
  debs "libjemalloc2" libjemalloc2
  sharp_app
  config --config.env=NODE_VERSION=$NODE --config.env=LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
    --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# jemalloc installed but not preloaded: jemalloc-not-preloaded fires (and sharp-glibc-allocator).
recipe_node_sharp_jemalloc_unused() {
  ARCH=amd64
  debian_node
  debs "libjemalloc2" libjemalloc2
  sharp_app
  config --config.env=NODE_VERSION=$NODE --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# Only an arena cap: sharp-glibc-allocator reports a note.
recipe_node_sharp_arena_cap() {
  ARCH=amd64
  debian_node
  sharp_app
  config --config.env=NODE_VERSION=$NODE --config.env=MALLOC_ARENA_MAX=2 --config.workingdir=/app \
    --config.cmd=node --config.cmd=server.js
}

# node_modules installed for musl and copied onto a glibc image: sharp-platform-mismatch fires.
recipe_node_sharp_wrong_libc() {
  ARCH=amd64
  debian_node
  npm_modules app "sharp@$SHARP for musl" "sharp@$SHARP" "@img/sharp-linuxmusl-x64@$SHARP" \
    "@img/sharp-libvips-linuxmusl-x64@$LIBVIPS" "detect-libc@2.1.2" "semver@7.7.3"
  debs "libjemalloc2" libjemalloc2
  config --config.env=NODE_VERSION=$NODE --config.env=LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
    --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# Node with --max-old-space-size and no --max-semi-space-size: node-semi-space fires.
recipe_node_old_space() {
  ARCH=amd64
  debian_node
  config --config.env=NODE_VERSION=$NODE --config.env="NODE_OPTIONS=--max-old-space-size=768" \
    --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# The fixed twin.
recipe_node_old_and_semi_space() {
  ARCH=amd64
  debian_node
  config --config.env=NODE_VERSION=$NODE --config.env="NODE_OPTIONS=--max-old-space-size=768 --max-semi-space-size=16" \
    --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# A Next.js standalone build (`output: 'standalone'`) in /app: the real next package.json, the
# required-server-files.json a real `next build` of VERSION wrote (testdata/node), sharp, and
# jemalloc preloaded so that only the Next.js settings are at stake.
next_app() {
  local version=$1
  debian_node
  debs "libjemalloc2" libjemalloc2
  sharp_app
  npm_manifest app "COPY .next/standalone/node_modules/next /app/node_modules/next" "next@$version"
  repo_files "COPY .next/standalone/.next /app/.next" \
    "testdata/node/next-$version-required-server-files.json=app/.next/required-server-files.json"
  config --config.env=NODE_VERSION=$NODE --config.env=LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
    --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# Next 15.5.14 with the 15.x defaults: minimumCacheTTL 60 and no maximumDiskCacheSize, so
# next-image-cache-ttl and next-image-disk-cache fire.
recipe_next_15() {
  ARCH=amd64
  next_app 15.5.14
}

# The fixed twin: Next 16.1.7, minimumCacheTTL 14400 and maximumDiskCacheSize set.
recipe_next_16() {
  ARCH=amd64
  next_app 16.1.7
}

# musl image with Debian's glibc-built jemalloc preloaded: musl loads it and fails.
recipe_musl_glibc_jemalloc() {
  ARCH=amd64
  musl_root
  copy_from_deb "COPY libjemalloc.so.2 /usr/lib/" amd64 libjemalloc2 \
    usr/lib/x86_64-linux-gnu/libjemalloc.so.2 usr/lib/libjemalloc.so.2
  config --config.env="LD_PRELOAD=/usr/lib/libjemalloc.so.2" --config.cmd=/usr/local/bin/hello
}

# --- .NET and Npgsql --------------------------------------------------------------------------

# A published ASP.NET app on Debian: the real .NET runtime, the app's deps.json (Npgsql 10.0.3),
# runtimeconfig.json and appsettings.json from testdata/dotnet. The assembly itself is a stub:
# memlint reads the app's metadata, never its IL.
dotnet_app() {
  debian_glibc
  debs "libstdc++6 libicu72" libstdc++6 libicu72 zlib1g
  dotnet_runtime
  repo_files "COPY out/ /app/" testdata/dotnet/WebApi.deps.json=app/WebApi.deps.json \
    testdata/dotnet/WebApi.runtimeconfig.json=app/WebApi.runtimeconfig.json \
    testdata/dotnet/image/appsettings.json=app/appsettings.json
  files "COPY out/WebApi.dll /app/" "app/WebApi.dll=MZ (assembly not built here)"
}

# Npgsql 10 without Kerberos and .NET on glibc malloc: npgsql-gssapi-missing and
# dotnet-glibc-allocator fire.
recipe_dotnet_npgsql() {
  ARCH=amd64
  dotnet_app
  config --config.workingdir=/app --config.entrypoint=dotnet --config.entrypoint=WebApi.dll
}

# The fixed twin: Kerberos' GSSAPI library installed and glibc's arenas capped.
recipe_dotnet_npgsql_fixed() {
  ARCH=amd64
  dotnet_app
  debs "libgssapi-krb5-2" libgssapi-krb5-2 libkrb5-3 libk5crypto3 libcom-err2 libkrb5support0 libkeyutils1 libssl3
  config --config.env=MALLOC_ARENA_MAX=2 --config.workingdir=/app --config.entrypoint=dotnet --config.entrypoint=WebApi.dll
}

# The other fixes: GSS encryption off for the container, jemalloc preloaded.
recipe_dotnet_npgsql_pggssencmode() {
  ARCH=amd64
  dotnet_app
  debs "libjemalloc2" libjemalloc2
  config --config.env=PGGSSENCMODE=disable --config.env=LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
    --config.workingdir=/app --config.entrypoint=dotnet --config.entrypoint=WebApi.dll
}

# --- Benchmark ---------------------------------------------------------------------------------

# bench/run.sh's image: about 1.6 GB of real Debian packages in 10 gzip layers (no ld.so.cache
# layers in between).
recipe_bench() {
  ARCH=amd64
  LDCONFIG=0
  base
  debs "golang-1.19-go" golang-1.19-go
  debs "firefox-esr" firefox-esr
  debs "chromium" chromium
  debs "openjdk-17-jre-headless" openjdk-17-jre-headless
  debs "golang-1.19-src" golang-1.19-src
  debs "libllvm15" libllvm15
  debs "libreoffice-core" libreoffice-core
  debs "gcc-12 cpp-12 libclang-cpp15" gcc-12 cpp-12 libclang-cpp15
  config --config.cmd=/bin/sh
}
