# --- Allocator settings that do nothing (malloc-conf-ineffective) ----------------------------

# musl with glibc's arena settings: musl reads neither.
recipe_musl_arena_cap() {
  ARCH=amd64
  musl_root
  config --config.env=MALLOC_ARENA_MAX=2 --config.env=GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072 \
    --config.cmd=/usr/local/bin/hello
}

# jemalloc preloaded, and a glibc malloc tunable beside a tunable that still applies.
recipe_glibc_jemalloc_tunables() {
  ARCH=amd64
  debian_jemalloc
  config --config.env="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" \
    --config.env=GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.pthread.rseq=0 --config.cmd=/bin/sh
}

# jemalloc preloaded by ENV, MALLOC_ARENA_MAX exported by the entrypoint script.
recipe_glibc_jemalloc_script_arena_cap() {
  ARCH=amd64
  debian_jemalloc
  repo_files "COPY start /usr/local/bin/start" testdata/recipes/malloc-settings/start=usr/local/bin/start
  config --config.env="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" \
    --config.entrypoint=/usr/local/bin/start --config.cmd=/bin/sh
}
