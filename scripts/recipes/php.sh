# PHP recipes (php-workers-exceed-limit): Debian 12's php8.2-fpm, and apache2 with
# libapache2-mod-php8.2, laid out as their maintainer scripts leave them (php.ini copied from
# php.ini-production, Apache's modules enabled by links in mods-enabled), with the settings
# changed by `sed` as users change them.

# php_edited "CREATED_BY" PKG FILE DEST SED_SCRIPT : FILE of the Debian package PKG, edited with
# `sed -e SED_SCRIPT`, at DEST.
php_edited() {
  local by=$1 pkg=$2 file=$3 dest=$4 script=$5 deb tmp stage
  deb=$(fetch_debs "$ARCH" "$pkg")
  tmp=$(mktemp -d "$WORK/deb.XXXX")
  dpkg-deb -x "$deb" "$tmp"
  stage=$(new_stage)
  mkdir -p "$stage/$(dirname "$dest")"
  sed -e "$script" "$tmp/$file" >"$stage/$dest"
  grep -q . "$stage/$dest" || die "php_edited: $file is empty"
  rm -rf "$tmp"
  commit_stage "$stage" "$by"
}

# Debian 12 with php8.2-fpm and the libraries it links, and php.ini as the package's postinst
# installs it (php.ini-production, `memory_limit = 128M`) with memory_limit set to MEMORY.
php_fpm_debian() {
  local memory=$1
  ARCH=amd64
  debian_glibc
  debs "php8.2-fpm" libargon2-1 libsodium23 libpcre2-8-0 zlib1g libssl3 libxml2 libicu72 \
    liblzma5 libacl1 libapparmor1 libsystemd0 libcap2 libgcrypt20 libgpg-error0 liblz4-1 \
    libzstd1 libstdc++6 php8.2-common php8.2-fpm
  php_edited "RUN cp /usr/lib/php/8.2/php.ini-production /etc/php/8.2/fpm/php.ini && sed -i 's/^memory_limit = .*/memory_limit = $memory/' /etc/php/8.2/fpm/php.ini" \
    php8.2-common usr/lib/php/8.2/php.ini-production etc/php/8.2/fpm/php.ini \
    "s/^memory_limit = .*/memory_limit = $memory/"
}

# php-fpm8.2 in the foreground with www.conf's pm.max_children raised to 50 and
# memory_limit = 256M: 12.5 GiB of workers under a 2Gi limit (the issue's "done when").
recipe_php_fpm_children() {
  php_fpm_debian 256M
  php_edited "RUN sed -i 's/^pm.max_children = .*/pm.max_children = 50/' /etc/php/8.2/fpm/pool.d/www.conf" \
    php8.2-fpm etc/php/8.2/fpm/pool.d/www.conf etc/php/8.2/fpm/pool.d/www.conf \
    "s/^pm.max_children = .*/pm.max_children = 50/"
  config --config.cmd=php-fpm8.2 --config.cmd=-F
}

# The fixed twin: the 7 children that fit in 2Gi less 64 MiB, recycled after 500 requests.
recipe_php_fpm_children_fixed() {
  php_fpm_debian 256M
  php_edited "RUN sed -i 's/^pm.max_children = .*/pm.max_children = 7/; s/^;pm.max_requests = .*/pm.max_requests = 500/' /etc/php/8.2/fpm/pool.d/www.conf" \
    php8.2-fpm etc/php/8.2/fpm/pool.d/www.conf etc/php/8.2/fpm/pool.d/www.conf \
    "s/^pm.max_children = .*/pm.max_children = 7/; s/^;pm.max_requests = .*/pm.max_requests = 500/"
  config --config.cmd=php-fpm8.2 --config.cmd=-F
}

# The count from the environment, as FPM expands it: `pm.max_children = ${PHP_CHILDREN}` with
# ENV PHP_CHILDREN=40 (a manifest's env can set it per Deployment).
recipe_php_fpm_env_children() {
  php_fpm_debian 256M
  php_edited "RUN sed -i 's/^pm.max_children = .*/pm.max_children = \${PHP_CHILDREN}/' /etc/php/8.2/fpm/pool.d/www.conf" \
    php8.2-fpm etc/php/8.2/fpm/pool.d/www.conf etc/php/8.2/fpm/pool.d/www.conf \
    's/^pm.max_children = .*/pm.max_children = ${PHP_CHILDREN}/'
  config --config.env=PHP_CHILDREN=40 --config.cmd=php-fpm8.2 --config.cmd=-F
}

# Debian 12's apache2 with libapache2-mod-php8.2: prefork and php8.2 enabled as the package's
# postinst does (a2dismod mpm_event; a2enmod mpm_prefork php8.2), apache2's php.ini from
# php.ini-production (memory_limit = 128M), mpm_prefork.conf's MaxRequestWorkers set to WORKERS.
php_apache_debian() {
  local workers=$1
  ARCH=amd64
  debian_glibc
  debs "apache2 libapache2-mod-php8.2" libapr1 libaprutil1 libpcre2-8-0 libargon2-1 libsodium23 \
    zlib1g libssl3 libxml2 libicu72 liblzma5 libstdc++6 apache2-bin apache2-data apache2 \
    php8.2-common libapache2-mod-php8.2
  php_edited "RUN cp /usr/lib/php/8.2/php.ini-production /etc/php/8.2/apache2/php.ini" \
    php8.2-common usr/lib/php/8.2/php.ini-production etc/php/8.2/apache2/php.ini ""
  php_edited "RUN sed -i 's/^\\(\\s*MaxRequestWorkers\\s*\\).*/\\1$workers/' /etc/apache2/mods-available/mpm_prefork.conf" \
    apache2 etc/apache2/mods-available/mpm_prefork.conf etc/apache2/mods-available/mpm_prefork.conf \
    "s/^\\(\\s*MaxRequestWorkers\\s*\\).*/\\1$workers/"
  local stage
  stage=$(new_stage)
  mkdir -p "$stage/etc/apache2/mods-enabled"
  for m in mpm_prefork.load mpm_prefork.conf php8.2.load php8.2.conf; do
    ln -s "../mods-available/$m" "$stage/etc/apache2/mods-enabled/$m"
  done
  commit_stage "$stage" "RUN a2dismod mpm_event && a2enmod mpm_prefork php8.2"
  config --config.cmd=apache2ctl --config.cmd=-D --config.cmd=FOREGROUND
}

# Apache's shipped MaxRequestWorkers 150 × 128M = 18.75 GiB under 2Gi.
recipe_php_apache_prefork() {
  php_apache_debian 150
}

# The fixed twin: 14 children × 128M within 2Gi less 64 MiB.
recipe_php_apache_prefork_fixed() {
  php_apache_debian 14
}
