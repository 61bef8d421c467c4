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

# musl image with Debian's glibc-built jemalloc preloaded: musl loads it and fails.
recipe_musl_glibc_jemalloc() {
  ARCH=amd64
  musl_root
  copy_from_deb "COPY libjemalloc.so.2 /usr/lib/" amd64 libjemalloc2 \
    usr/lib/x86_64-linux-gnu/libjemalloc.so.2 usr/lib/libjemalloc.so.2
  config --config.env="LD_PRELOAD=/usr/lib/libjemalloc.so.2" --config.cmd=/usr/local/bin/hello
}
