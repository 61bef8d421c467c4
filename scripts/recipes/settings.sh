# Runtime settings that break or mis-size a service (issue 16): .NET GC variables, Server GC
# without DATAS, Node before cgroup v2 support. Files copied in are in testdata/recipes/settings/.

# --- Node.js before and after 20.3 (libuv 1.45: cgroup v2 memory limits) ---------------------

# Debian 12 with an official Node.js release binary (npm's node-linux-* package) and a server.
settings_node() {
  debian_glibc
  debs "libstdc++6" libstdc++6
  node_runtime "$1"
  repo_files "COPY server.js /app/" testdata/recipes/settings/server.js=app/server.js
}

# Node 18.20.8, the last 18.x, with no heap flag: node-cgroup-v2-unaware fires.
recipe_node_18() {
  ARCH=amd64
  settings_node 18.20.8
  config --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# The fixed twin: the same Node with --max-old-space-size in NODE_OPTIONS.
recipe_node_18_heap_flag() {
  ARCH=amd64
  settings_node 18.20.8
  config --config.env=NODE_OPTIONS=--max-old-space-size=384 \
    --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# Node 18 started by an entrypoint script that builds NODE_OPTIONS at run time (from a file
# memlint cannot read): node-cgroup-v2-unaware stays undecided and -v names the line.
recipe_node_18_script_options() {
  ARCH=amd64
  settings_node 18.20.8
  repo_files "COPY start /usr/local/bin/start" \
    testdata/recipes/settings/start-node-options=usr/local/bin/start
  config --config.workingdir=/app --config.entrypoint=/usr/local/bin/start \
    --config.cmd=node --config.cmd=server.js
}

# The other fix: Node 20.3.0, the first release that reads cgroup v2 limits.
recipe_node_20_3() {
  ARCH=amd64
  settings_node 20.3.0
  config --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# Node 20.2.0 (libuv 1.44.2), the last release before: fires, with the heap flag on the command
# line written without `=` (node exits with code 9, so it is not in effect).
recipe_node_20_2_bad_flag() {
  ARCH=amd64
  settings_node 20.2.0
  config --config.workingdir=/app --config.cmd=node --config.cmd=--max-old-space-size \
    --config.cmd=384 --config.cmd=server.js
}

# Debian 12's own nodejs package (18.20.4) and its libraries, as `apt-get install nodejs` puts
# them: /usr/bin/node links libnode.so.108, the version is in the dpkg database only.
recipe_node_debian() {
  ARCH=amd64
  debian_glibc
  debian_nodejs_deb
  debs "nodejs" libstdc++6 libicu72 libuv1 libbrotli1 libc-ares2 libnghttp2-14 libssl3 zlib1g \
    libnode108 nodejs
  repo_files "COPY server.js /app/" testdata/recipes/settings/server.js=app/server.js
  config --config.workingdir=/app --config.cmd=node --config.cmd=server.js
}

# Puts Debian 12's nodejs and libnode108 .debs in the download cache: a host with another
# nodejs installed (NodeSource) has that one as apt's candidate, so the version is named.
debian_nodejs_deb() {
  local dir="$CACHE/debs/$ARCH" ver pkg
  ensure_arch "$ARCH"
  mkdir -p "$dir"
  for pkg in libnode108 nodejs; do
    ls "$dir/${pkg}"_*_"$ARCH".deb >/dev/null 2>&1 && continue
    ver=$(apt-cache madison "$pkg" | awk -F'|' '$2 ~ /deb12/ && $3 ~ /debian/ {gsub(/ /, "", $2); print $2; exit}')
    [ -n "$ver" ] || die "no Debian 12 version of $pkg known to apt"
    (cd "$dir" && apt-get download -qq -o APT::Sandbox::User=root "$pkg:$ARCH=$ver" >&2) || die "cannot download $pkg=$ver"
  done
}

# --- .NET GC settings -------------------------------------------------------------------------

# An ASP.NET Core 8 app as `dotnet publish` writes it (Server GC in its runtimeconfig.json) on
# Debian with the real .NET runtime of the other .NET images.
settings_dotnet_app() {
  debian_glibc
  debs "libstdc++6 libicu72" libstdc++6 libicu72 zlib1g
  dotnet_runtime
  repo_files "COPY out/ /app/" testdata/recipes/settings/Orders.runtimeconfig.json=app/Orders.runtimeconfig.json \
    testdata/recipes/settings/Orders.deps.json=app/Orders.deps.json
  files "COPY out/Orders.dll /app/" "app/Orders.dll=MZ (assembly not built here)"
}

settings_dotnet_config() {
  config "$@" --config.workingdir=/app --config.entrypoint=dotnet --config.entrypoint=Orders.dll
}

# A 100 MB heap limit written in decimal: the runtime reads 0x100000000, 4 GiB.
# dotnet-gc-env-decimal fires.
recipe_dotnet_gc_decimal() {
  ARCH=amd64
  settings_dotnet_app
  settings_dotnet_config --config.env=DOTNET_GCHeapHardLimit=100000000
}

# The fixed twin: the same limit in hexadecimal.
recipe_dotnet_gc_hex() {
  ARCH=amd64
  settings_dotnet_app
  settings_dotnet_config --config.env=DOTNET_GCHeapHardLimit=0x5F5E100
}

# Server GC on .NET 8 with DATAS off by default and nothing bounding the heaps:
# dotnet-server-gc-container fires.
recipe_dotnet_server_gc() {
  ARCH=amd64
  settings_dotnet_app
  settings_dotnet_config --config.env=ASPNETCORE_HTTP_PORTS=8080
}

# The fixed twin: DATAS turned on.
recipe_dotnet_server_gc_datas() {
  ARCH=amd64
  settings_dotnet_app
  settings_dotnet_config --config.env=ASPNETCORE_HTTP_PORTS=8080 --config.env=DOTNET_GCDynamicAdaptationMode=1
}
