# Image recipes for scripts/build-image.sh, one function each: recipe_NAME builds image NAME.
# Each sets ARCH (Debian's name), then stacks layers with base, debs, npm_modules, files,
# symlink, remove and config. Comments say what the image is for.

# The README's demo: Debian 12 with jemalloc installed, whose LD_PRELOAD names the arm64
# multiarch folder on an amd64 image, the silent failure of ../shared/brief.md (Rule C).
recipe_demo() {
  ARCH=amd64
  base
  debs "libc6" gcc-12-base libgcc-s1 libc6
  debs "libjemalloc2" libstdc++6 libjemalloc2
  config --config.env="LD_PRELOAD=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2" --config.cmd=/bin/sh
}
