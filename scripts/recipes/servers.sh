# Server images (issue #30): Debian 12's real Redis 7.0.15 (redis-server is a link to
# redis-check-rdb from redis-tools; the server tells its mode from the name it runs by), Debian's
# OpenJDK 17 with Netty from libnetty-java, and an OpenSearch-shaped image whose launcher
# files are the lines OpenSearch 2.x ships (testdata/recipes/servers/opensearch/).

# Debian 12 with Redis and the libraries the server needs (jemalloc, lzf, atomic).
debian_redis() {
  debian_glibc
  debs "redis-server" libatomic1 libjemalloc2 liblzf1 redis-tools redis-server
}

# Debian's layout: the package's /etc/redis/redis.conf (maxmemory commented out), run in the
# foreground; ENTRYPOINT so that a manifest's args replace only the arguments.
recipe_redis_debian() {
  ARCH=amd64
  debian_redis
  config --config.entrypoint=redis-server --config.cmd=/etc/redis/redis.conf \
    --config.cmd=--daemonize --config.cmd=no
}

# The same with maxmemory and an eviction policy on the command line.
recipe_redis_debian_maxmemory() {
  ARCH=amd64
  debian_redis
  config --config.entrypoint=redis-server --config.cmd=/etc/redis/redis.conf \
    --config.cmd=--daemonize --config.cmd=no --config.cmd=--maxmemory --config.cmd=160mb \
    --config.cmd=--maxmemory-policy --config.cmd=allkeys-lru
}

# Debian's OpenJDK 17 with Netty 4.1.48 (libnetty-java: /usr/share/java/netty-*.jar) on the
# class path of `java -cp "/usr/share/java/*:/app" Main`.
recipe_jdk17_netty() {
  ARCH=amd64
  debian_jdk17
  debs "libnetty-java" libjctools-java libnetty-java
  config --config.entrypoint=java --config.entrypoint=-cp --config.entrypoint="/usr/share/java/*:/app" \
    --config.entrypoint=Main
}

# OpenSearch's layout on Debian's JDK 17 (bundled as /usr/share/opensearch/jdk, as OpenSearch
# bundles its own): bin/opensearch, config/jvm.options and the docker entrypoint with the lines
# OpenSearch 2.x ships, and Netty in its transport module.
recipe_opensearch_shaped() {
  ARCH=amd64
  debian_jdk17
  local os=testdata/recipes/servers/opensearch
  repo_files "COPY opensearch /usr/share/opensearch" \
    "$os/opensearch=usr/share/opensearch/bin/opensearch" \
    "$os/jvm.options=usr/share/opensearch/config/jvm.options" \
    "$os/opensearch-docker-entrypoint.sh=usr/share/opensearch/opensearch-docker-entrypoint.sh"
  symlink "RUN ln -s /usr/lib/jvm/java-17-openjdk-amd64 /usr/share/opensearch/jdk" \
    usr/share/opensearch/jdk /usr/lib/jvm/java-17-openjdk-amd64
  files "COPY netty /usr/share/opensearch/modules/transport-netty4" \
    "usr/share/opensearch/modules/transport-netty4/netty-buffer-4.1.118.Final.jar=PK"
  config --config.workingdir=/usr/share/opensearch \
    --config.entrypoint=./opensearch-docker-entrypoint.sh --config.cmd=opensearch
}
