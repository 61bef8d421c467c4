# Worker counts from the node's CPUs beyond Python (worker-count-host-cpus: pm2, uWSGI, nginx,
# puma) and a prefixed jemalloc (malloc-conf-ineffective: the polars-runtime-32 wheel), from
# real packages with the configs their users write (testdata/recipes/workers/).

# pm2 from npm, installed globally as `npm install -g pm2` lays it out, on the official Node.js
# build, with a server and its ecosystem file ECOSYSTEM in /app.
pm2_app() {
  local ecosystem=$1
  ARCH=amd64
  debian_glibc
  debs "libstdc++6" libstdc++6
  node_runtime "$NODE"
  npm_modules usr/local/lib "pm2@5.4.3" "pm2@5.4.3"
  symlink "RUN npm install -g pm2@5.4.3" usr/local/bin/pm2-runtime ../lib/node_modules/pm2/bin/pm2-runtime
  files "COPY server.js /app/" "app/server.js=require('http').createServer((q, s) => s.end('ok')).listen(3000);"
  repo_files "COPY ecosystem.config.js /app/" "testdata/recipes/workers/$ecosystem=app/ecosystem.config.js"
  config --config.env=NODE_VERSION=$NODE --config.workingdir=/app
}

# `pm2-runtime start ecosystem.config.js` with `instances: "max"`.
recipe_pm2_instances_max() {
  pm2_app ecosystem.config.js
  config --config.cmd=pm2-runtime --config.cmd=start --config.cmd=ecosystem.config.js
}

# The fixed twin: `instances: 2`.
recipe_pm2_instances_fixed() {
  pm2_app ecosystem-fixed.config.js
  config --config.cmd=pm2-runtime --config.cmd=start --config.cmd=ecosystem.config.js
}

# `pm2-runtime server.js -i max` on the command line.
recipe_pm2_i_max() {
  pm2_app ecosystem-fixed.config.js
  config --config.cmd=pm2-runtime --config.cmd=server.js --config.cmd=-i --config.cmd=max
}

# Debian's uwsgi-core with an app's uwsgi.ini (INI) in /app.
uwsgi_app() {
  local ini=$1
  ARCH=amd64
  debian_glibc
  debs "uwsgi-core" libjansson4 libpcre3 libxml2 libyaml-0-2 libcap2 libssl3 zlib1g libuuid1 \
    libicu72 liblzma5 libstdc++6 libcrypt1 libsystemd0 libzstd1 liblz4-1 libgcrypt20 libgpg-error0 uwsgi-core
  repo_files "COPY uwsgi.ini /app/" "testdata/recipes/workers/$ini=app/uwsgi.ini"
  config --config.workingdir=/app --config.cmd=uwsgi-core --config.cmd=--ini --config.cmd=/app/uwsgi.ini
}

# `processes = %k`: one worker per CPU core uWSGI detects.
recipe_uwsgi_processes_cores() {
  uwsgi_app uwsgi.ini
}

# The fixed twin: `processes = 2`.
recipe_uwsgi_processes_fixed() {
  uwsgi_app uwsgi-fixed.ini
}

# Debian's nginx as packaged: nginx.conf's `worker_processes auto;`.
nginx_debian() {
  ARCH=amd64
  debian_glibc
  debs "nginx" libpcre2-8-0 libssl3 zlib1g libcrypt1 nginx-common nginx
}

recipe_nginx_auto() {
  nginx_debian
  config --config.cmd=nginx --config.cmd=-g --config.cmd="daemon off;"
}

# The fixed twin: `worker_processes 2;`, as a Dockerfile's sed writes it.
recipe_nginx_two_workers() {
  nginx_debian
  php_edited "RUN sed -i 's/^worker_processes auto;/worker_processes 2;/' /etc/nginx/nginx.conf" \
    nginx-common etc/nginx/nginx.conf etc/nginx/nginx.conf 's/^worker_processes auto;/worker_processes 2;/'
  config --config.cmd=nginx --config.cmd=-g --config.cmd="daemon off;"
}

# A Rails app on Debian's ruby with Rails 7.1's config/puma.rb: workers from
# Concurrent.physical_processor_count unless WEB_CONCURRENCY is set.
recipe_puma_processor_count() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app 7.2
  repo_files "COPY config/puma.rb" testdata/recipes/workers/puma.rb=rails/config/puma.rb
  rails_config
}

# The fixed twin: WEB_CONCURRENCY=2, which the config reads.
recipe_puma_web_concurrency() {
  ARCH=amd64
  debian_ruby
  debs "libjemalloc2" libstdc++6 libjemalloc2
  rails_app 7.2
  repo_files "COPY config/puma.rb" testdata/recipes/workers/puma.rb=rails/config/puma.rb
  rails_config --config.env=WEB_CONCURRENCY=2
}

# Debian 12's python3.11 with polars and the polars-runtime-32 wheel from PyPI, whose Rust
# extension carries jemalloc built by tikv-jemallocator (prefix `_rjem_`).
python_polars() {
  ARCH=amd64
  debian_glibc
  debs "python3.11-minimal" libexpat1 zlib1g libpython3.11-minimal python3.11-minimal
  symlink "RUN ln -s python3.11 /usr/bin/python3" usr/bin/python3 python3.11
  wheels "RUN pip install polars==1.35.2" polars==1.35.2 polars_runtime_32==1.35.2
  repo_files "COPY app.py" testdata/recipes/workers/app.py=app/app.py
}

# MALLOC_CONF, which that jemalloc never reads.
recipe_python_polars_malloc_conf() {
  python_polars
  config --config.env=MALLOC_CONF=background_thread:true --config.workingdir=/app \
    --config.cmd=python3 --config.cmd=app.py
}

# The fixed twin: the same options in _RJEM_MALLOC_CONF.
recipe_python_polars_rjem_conf() {
  python_polars
  config --config.env=_RJEM_MALLOC_CONF=background_thread:true --config.workingdir=/app \
    --config.cmd=python3 --config.cmd=app.py
}
