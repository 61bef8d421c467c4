# Python recipes: Debian's python3.11 with wheels from PyPI unpacked into dist-packages as pip
# installs them, and gunicorn's console script (testdata/recipes/python/).

# fetch_wheel NAME==VERSION : a wheel from PyPI for CPython 3.11 on manylinux2014 x86_64 (or a
# pure-Python one), downloaded once into $CACHE/pypi.
fetch_wheel() {
  local spec=$1 dir="$CACHE/pypi" name f
  name=${spec%%==*}
  mkdir -p "$dir"
  f=$(ls "$dir/${name}-${spec#*==}-"*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$f" ]; then
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform manylinux2014_x86_64 --python-version 3.11 -d "$dir" "$spec" >&2 ||
      die "cannot download $spec from PyPI"
    f=$(ls "$dir/${name}-${spec#*==}-"*.whl | head -n 1)
  fi
  printf '%s\n' "$f"
}

# wheels "CREATED_BY" NAME==VERSION... : one layer with these wheels unpacked into
# /usr/local/lib/python3.11/dist-packages (where Debian's pip installs), dist-info included.
wheels() {
  local by=$1 stage spec whl
  shift
  stage=$(new_stage)
  mkdir -p "$stage/usr/local/lib/python3.11/dist-packages"
  for spec in "$@"; do
    whl=$(fetch_wheel "$spec")
    python3 -m zipfile -e "$whl" "$stage/usr/local/lib/python3.11/dist-packages"
  done
  commit_stage "$stage" "$by"
}

# Debian 12's python3.11 (interpreter and minimal standard library) with numpy and gunicorn
# from PyPI, gunicorn's console script and a WSGI app.
python_numpy_gunicorn() {
  ARCH=amd64
  debian_glibc
  debs "python3.11-minimal" libexpat1 zlib1g libpython3.11-minimal python3.11-minimal
  symlink "RUN ln -s python3.11 /usr/bin/python3" usr/bin/python3 python3.11
  wheels "RUN pip install numpy==1.26.4 gunicorn==23.0.0" numpy==1.26.4 gunicorn==23.0.0 \
    packaging==24.2
  repo_files "COPY gunicorn app.py" testdata/recipes/python/gunicorn=usr/local/bin/gunicorn \
    testdata/recipes/python/app.py=app/app.py
}

# numpy under gunicorn with four worker processes of four threads, on glibc malloc with no
# arena cap: python-glibc-allocator fires.
recipe_python_numpy_gunicorn() {
  python_numpy_gunicorn
  config --config.workingdir=/app --config.cmd=gunicorn --config.cmd=--workers=4 \
    --config.cmd=--threads=4 --config.cmd=app:app
}

# The same with MALLOC_ARENA_MAX=2: the fixed twin.
recipe_python_numpy_gunicorn_capped() {
  python_numpy_gunicorn
  config --config.env=MALLOC_ARENA_MAX=2 --config.workingdir=/app --config.cmd=gunicorn \
    --config.cmd=--workers=4 --config.cmd=--threads=4 --config.cmd=app:app
}

# The same with Debian's jemalloc preloaded by its bare name: another fixed twin, through the
# allocator rather than an arena cap.
recipe_python_numpy_gunicorn_jemalloc() {
  python_numpy_gunicorn
  debs "libjemalloc2" libstdc++6 libjemalloc2
  config --config.env=LD_PRELOAD=libjemalloc.so.2 --config.workingdir=/app --config.cmd=gunicorn \
    --config.cmd=--workers=4 --config.cmd=--threads=4 --config.cmd=app:app
}

# worker-count-host-cpus: Debian 12's python3.11 with Celery from PyPI (its console script, and
# a Celery app whose settings do not name the concurrency).
python_celery() {
  ARCH=amd64
  debian_glibc
  debs "python3.11-minimal" libexpat1 zlib1g libpython3.11-minimal python3.11-minimal
  symlink "RUN ln -s python3.11 /usr/bin/python3" usr/bin/python3 python3.11
  wheels "RUN pip install celery==5.4.0" celery==5.4.0
  repo_files "COPY celery proj" testdata/recipes/python/celery=usr/local/bin/celery \
    testdata/recipes/python/proj/__init__.py=app/proj/__init__.py \
    testdata/recipes/python/proj/celery.py=app/proj/celery.py
}

# `celery -A proj worker` with no --concurrency: one process per CPU of the node.
recipe_python_celery_worker() {
  python_celery
  config --config.workingdir=/app --config.cmd=celery --config.cmd=-A --config.cmd=proj \
    --config.cmd=worker --config.cmd=--loglevel=INFO
}

# The fixed twin: CELERY_WORKER_CONCURRENCY=2.
recipe_python_celery_worker_concurrency() {
  python_celery
  config --config.env=CELERY_WORKER_CONCURRENCY=2 --config.workingdir=/app --config.cmd=celery \
    --config.cmd=-A --config.cmd=proj --config.cmd=worker --config.cmd=--loglevel=INFO
}

# gunicorn with /app/gunicorn.conf.py (read by default) assigning workers from cpu_count(),
# and WEB_CONCURRENCY=2, which that config never reads.
recipe_python_gunicorn_cpu_conf() {
  python_numpy_gunicorn
  repo_files "COPY gunicorn.conf.py" \
    testdata/recipes/python/gunicorn-cpu.conf.py=app/gunicorn.conf.py
  config --config.env=WEB_CONCURRENCY=2 --config.workingdir=/app --config.cmd=gunicorn \
    --config.cmd=app:app
}

# The fixed twin: GUNICORN_CMD_ARGS=--workers=2, which gunicorn reads after the config file.
recipe_python_gunicorn_cpu_conf_fixed() {
  python_numpy_gunicorn
  repo_files "COPY gunicorn.conf.py" \
    testdata/recipes/python/gunicorn-cpu.conf.py=app/gunicorn.conf.py
  config --config.env=WEB_CONCURRENCY=2 --config.env=GUNICORN_CMD_ARGS=--workers=2 \
    --config.workingdir=/app --config.cmd=gunicorn --config.cmd=app:app
}

# gunicorn -c /gunicorn_conf.py, the uvicorn-gunicorn images' config: it reads WEB_CONCURRENCY
# and MAX_WORKERS, which the image does not set, and falls back to the CPU count.
recipe_python_gunicorn_conf_env() {
  python_numpy_gunicorn
  repo_files "COPY gunicorn_conf.py /gunicorn_conf.py" \
    testdata/recipes/python/gunicorn_conf.py=gunicorn_conf.py
  config --config.workingdir=/app --config.cmd=gunicorn --config.cmd=-c \
    --config.cmd=/gunicorn_conf.py --config.cmd=app:app
}
