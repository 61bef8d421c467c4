# --- Ruby (MRI) and Rails-style entrypoints ---------------------------------------------------
# Debian 12's ruby3.1 (libruby3.1, not built --with-jemalloc) with a Rails app laid out as Rails'
# generated Dockerfile does: WORKDIR /rails, ENTRYPOINT ["/rails/bin/docker-entrypoint"],
# CMD ["./bin/rails", "server"]. The entrypoints are Rails' templates (testdata/recipes/ruby).

# Debian's ruby 3.1 and the libraries libruby3.1 needs, and bash for the entrypoint.
debian_ruby() {
  debian_glibc
  debs "ruby" ruby ruby3.1 libruby3.1 libcrypt1 libgmp10 zlib1g libedit2 libbsd0 libmd0 \
    libffi8 libncurses6 libtinfo6 libssl3 libyaml-0-2
  debs "bash" bash
}

# The app: Gemfile.lock (puma, rails), bin/rails and bin/docker-entrypoint of FORM.
rails_app() {
  local form=$1
  repo_files "COPY . /rails" testdata/recipes/ruby/Gemfile.lock=rails/Gemfile.lock \
    testdata/recipes/ruby/rails=rails/bin/rails \
    "testdata/recipes/ruby/docker-entrypoint-$form=rails/bin/docker-entrypoint"
}

rails_config() {
  config --config.env=RAILS_ENV=production --config.workingdir=/rails \
    --config.entrypoint=/rails/bin/docker-entrypoint --config.cmd=./bin/rails --config.cmd=server "$@"
}

# No jemalloc, no arena cap: ruby-glibc-allocator fires (the 7.2 entrypoint finds nothing).
recipe_ruby_rails() {
  ARCH=amd64
  debian_ruby
  rails_app 7.2
  rails_config
}

# Rails 7.2: libjemalloc2 installed; the only preload is bin/docker-entrypoint's guarded export.
recipe_ruby_rails_7_2() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app 7.2
  rails_config
}

# Rails 8.0: the entrypoint's `find /usr/lib -name libjemalloc.so.2 -print -quit`.
recipe_ruby_rails_8_0() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app 8.0
  rails_config
}

# Rails 8.1: the Dockerfile links jemalloc to a fixed path and sets ENV LD_PRELOAD.
recipe_ruby_rails_8_1() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  symlink "RUN ln -s /usr/lib/\$(uname -m)-linux-gnu/libjemalloc.so.2 /usr/local/lib/libjemalloc.so" \
    usr/local/lib/libjemalloc.so /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
  rails_app 8.1
  rails_config --config.env=LD_PRELOAD=/usr/local/lib/libjemalloc.so
}

# The entrypoint exports the arm64 folder's jemalloc on an amd64 image: ld-preload-missing names
# the script and line.
recipe_ruby_script_arm64_path() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app arm64-path
  rails_config
}

# MALLOC_ARENA_MAX=2 beside the working jemalloc preload: malloc-conf-ineffective.
recipe_ruby_rails_7_2_arena_cap() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app 7.2
  rails_config --config.env=MALLOC_ARENA_MAX=2
}

# MALLOC_CONF with a key jemalloc does not know (and one it does).
recipe_ruby_rails_7_2_bad_conf() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app 7.2
  rails_config --config.env=MALLOC_CONF=narenas:2,backgroud_thread:true
}

# The fixed twin of both: jemalloc's own setting, spelled right.
recipe_ruby_rails_7_2_conf() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app 7.2
  rails_config --config.env=MALLOC_CONF=narenas:2,background_thread:true
}

# MALLOC_CONF but no jemalloc: nothing reads it.
recipe_ruby_rails_conf_no_jemalloc() {
  ARCH=amd64
  debian_ruby
  rails_app 7.2
  rails_config --config.env=MALLOC_CONF=narenas:2
}

# The entrypoint exports LD_PRELOAD from another command's output: the preload is undecided and
# ruby-glibc-allocator stays silent, saying why with -v.
recipe_ruby_rails_undecided() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app undecided
  rails_config
}
