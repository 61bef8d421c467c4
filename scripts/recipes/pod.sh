# The pod's own memory (issue #31): PostgreSQL 15 from Debian's packages, torch's core metadata
# as PyPI serves it beside the wheel, Debian's chromium with chromium-driver and
# python3-selenium, Puppeteer from npm, and an Elasticsearch-shaped layout.

# fetch_pypi_metadata NAME VERSION : the PEP 658 core metadata PyPI serves beside a manylinux
# x86_64 wheel of NAME VERSION (`<wheel URL>.metadata`), downloaded once into $CACHE/pypi; the
# wheel itself is never fetched.
fetch_pypi_metadata() {
  local name=$1 version=$2 f="$CACHE/pypi/$1-$2.metadata"
  mkdir -p "$CACHE/pypi"
  if [ ! -s "$f" ]; then
    python3 - "$name" "$version" "$f" <<'PY' || die "cannot fetch the metadata of $name $version"
import json, sys, urllib.request
name, version, out = sys.argv[1:]
# The simple index as JSON (PEP 691) lists each file; PEP 658 serves its core metadata at the
# file's URL with `.metadata` appended.
index = urllib.request.Request(f"https://pypi.org/simple/{name}/",
                               headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(index, timeout=60) as r:
    files = json.load(r)["files"]
wheels = sorted(f for f in (x["filename"] for x in files)
                if f.startswith(f"{name}-{version}-") and f.endswith("x86_64.whl") and "manylinux" in f)
if not wheels:
    sys.exit(f"no manylinux x86_64 wheel of {name} {version}")
url = next(x["url"] for x in files if x["filename"] == wheels[0]).split("#")[0]
with urllib.request.urlopen(url + ".metadata", timeout=60) as r:
    data = r.read()
open(out, "wb").write(data)
PY
  fi
  printf '%s\n' "$f"
}

# Debian 12's PostgreSQL 15 server (postgresql-15 alone: the layout and the configuration sample
# initdb copies), run as the Debian layout runs it.
postgres_15() {
  ARCH=amd64
  debian_glibc
  debs "postgresql-15" postgresql-15
}

# PostgreSQL 15 with the package's defaults: dynamic_shared_memory_type posix, huge_pages try.
recipe_postgres_15() {
  postgres_15
  config --config.cmd=/usr/lib/postgresql/15/bin/postgres --config.cmd=-D \
    --config.cmd=/var/lib/postgresql/data
}

# The same with its parallel segments in mmap'd files of the data folder, huge pages off.
recipe_postgres_15_mmap() {
  postgres_15
  config --config.cmd=/usr/lib/postgresql/15/bin/postgres --config.cmd=-D \
    --config.cmd=/var/lib/postgresql/data --config.cmd=-c \
    --config.cmd=dynamic_shared_memory_type=mmap --config.cmd=-c --config.cmd=huge_pages=off
}

# torch 2.5.1's METADATA from PyPI in site-packages, beside Debian's python3.11.
recipe_python_torch() {
  ARCH=amd64
  debian_glibc
  debs "python3.11-minimal" libexpat1 zlib1g libpython3.11-minimal python3.11-minimal
  local stage meta
  meta=$(fetch_pypi_metadata torch 2.5.1)
  stage=$(new_stage)
  mkdir -p "$stage/usr/local/lib/python3.11/site-packages/torch-2.5.1.dist-info"
  cp "$meta" "$stage/usr/local/lib/python3.11/site-packages/torch-2.5.1.dist-info/METADATA"
  commit_stage "$stage" "RUN pip install torch==2.5.1"
  config --config.env=NCCL_SHM_DISABLE=1 --config.cmd=python3.11 --config.cmd=/app/train.py
}

# Debian's chromium (its browser binary, the /usr/bin/chromium wrapper and /etc/chromium.d),
# chromium-driver and python3-selenium: what detection reads, out of the three packages.
chromium_selenium() {
  ARCH=amd64
  debian_glibc
  copy_from_deb "RUN apt-get install -y chromium" amd64 chromium usr/lib/chromium/chromium \
    /usr/lib/chromium/chromium
  copy_from_deb "RUN apt-get install -y chromium (wrapper)" amd64 chromium usr/bin/chromium \
    /usr/bin/chromium
  local f
  for f in default-flags dev-shm; do
    copy_from_deb "RUN apt-get install -y chromium (/etc/chromium.d/$f)" amd64 chromium \
      "etc/chromium.d/$f" "/etc/chromium.d/$f"
  done
  copy_from_deb "RUN apt-get install -y chromium-driver" amd64 chromium-driver \
    usr/lib/chromium/chromedriver /usr/lib/chromium/chromedriver
  symlink "RUN apt-get install -y chromium-driver (link)" usr/bin/chromedriver \
    ../lib/chromium/chromedriver
  local stage deb tmp
  deb=$(fetch_debs amd64 python3-selenium)
  tmp=$(mktemp -d "$WORK/deb.XXXX")
  dpkg-deb -x "$deb" "$tmp"
  stage=$(new_stage)
  mkdir -p "$stage/usr/lib/python3/dist-packages"
  cp -a "$tmp"/usr/lib/python3/dist-packages/selenium-*.egg-info "$stage/usr/lib/python3/dist-packages/"
  rm -rf "$tmp"
  commit_stage "$stage" "RUN apt-get install -y python3-selenium"
}

# Chromium driven by Selenium through chromedriver, with no findmnt: Debian's dev-shm hook in
# /etc/chromium.d cannot measure /dev/shm, and nothing passes --disable-dev-shm-usage.
recipe_chromium_selenium() {
  chromium_selenium
  config --config.cmd=python3 --config.cmd=/app/scrape.py
}

# The same with util-linux's findmnt: Debian's /usr/bin/chromium adds --disable-dev-shm-usage
# itself when /dev/shm has less than 3.8 GB free.
recipe_chromium_selenium_findmnt() {
  chromium_selenium
  copy_from_deb "RUN apt-get install -y util-linux" amd64 util-linux bin/findmnt /usr/bin/findmnt
  config --config.cmd=python3 --config.cmd=/app/scrape.py
}

# Chromium started by Puppeteer (puppeteer-core from npm), which passes --disable-dev-shm-usage
# by default.
recipe_chromium_puppeteer() {
  ARCH=amd64
  debian_glibc
  copy_from_deb "RUN apt-get install -y chromium" amd64 chromium usr/lib/chromium/chromium \
    /usr/lib/chromium/chromium
  npm_modules app "puppeteer-core@24.31.0" puppeteer-core@24.31.0
  config --config.env=PUPPETEER_EXECUTABLE_PATH=/usr/lib/chromium/chromium \
    --config.workingdir=/app --config.cmd=node --config.cmd=render.js
}

# An Elasticsearch-shaped layout (the official image's paths: bin/elasticsearch, the version's
# jar, config/elasticsearch.yml, config/jvm.options.d) with bootstrap.memory_lock: true in its
# settings file and its heap set.
elasticsearch_shaped() {
  files "COPY elasticsearch /usr/share/elasticsearch" \
    "usr/share/elasticsearch/bin/elasticsearch=$(cat "$ROOT/testdata/recipes/pod/elasticsearch")" \
    "usr/share/elasticsearch/lib/elasticsearch-8.15.0.jar=" \
    "usr/share/elasticsearch/config/elasticsearch.yml=$(cat "$ROOT/testdata/recipes/pod/elasticsearch.yml")" \
    "usr/share/elasticsearch/config/jvm.options.d/heap.options=-Xms1g
-Xmx1g
"
}

recipe_elasticsearch_memory_lock() {
  ARCH=amd64
  debian_glibc
  elasticsearch_shaped
  config --config.cmd=/usr/share/elasticsearch/bin/elasticsearch
}
