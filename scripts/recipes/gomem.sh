# GOMEMLIMIT recipes (gomemlimit-malformed): a pure Go program built here with Debian's
# golang-go from testdata/recipes/gomem/server (it prints the soft memory limit the runtime
# took from GOMEMLIMIT), on Debian 12 with a shell, and the entrypoint scripts beside it.

# Debian 12 with the Go program as /app/server.
gomem_server() {
  ARCH=amd64
  debian_glibc
  # go_program builds from testdata/recipes/go/SRC.
  go_program "COPY --from=build /out/server /app/server" ../gomem/server app/server 0
}

# ENV GOMEMLIMIT=512Mi (a Kubernetes quantity): the runtime stops at start.
recipe_gomem_mi() {
  gomem_server
  config --config.env=GOMEMLIMIT=512Mi --config.entrypoint=/app/server
}

# ENV GOMEMLIMIT=512MiB: the fixed twin.
recipe_gomem_mib() {
  gomem_server
  config --config.env=GOMEMLIMIT=512MiB --config.entrypoint=/app/server
}

# An entrypoint script exports GOMEMLIMIT=400m over the image's valid 512MiB.
recipe_gomem_script_400m() {
  gomem_server
  repo_files "COPY start /usr/local/bin/start" testdata/recipes/gomem/start=usr/local/bin/start
  config --config.env=GOMEMLIMIT=512MiB --config.entrypoint=/usr/local/bin/start \
    --config.cmd=/app/server
}

# The script takes GOMEMLIMIT from a file at run time: undecided, never guessed.
recipe_gomem_script_undecided() {
  gomem_server
  repo_files "COPY start /usr/local/bin/start" \
    testdata/recipes/gomem/start-undecided=usr/local/bin/start
  config --config.entrypoint=/usr/local/bin/start --config.cmd=/app/server
}

# `env GOMEMLIMIT=1G /app/server` as the image's command (the ENV is valid); coreutils brings
# /usr/bin/env.
recipe_gomem_command_1g() {
  gomem_server
  debs "coreutils" coreutils
  config --config.env=GOMEMLIMIT=512MiB --config.entrypoint=env \
    --config.entrypoint=GOMEMLIMIT=1G --config.entrypoint=/app/server
}

# GOMEMLIMIT=512Mi on an image with no Go program: nothing reads it.
recipe_gomem_no_go() {
  ARCH=amd64
  debian_glibc
  config --config.env=GOMEMLIMIT=512Mi --config.cmd=/bin/sh
}
