#!/bin/bash

# The lines of OpenSearch 2.x's opensearch-docker-entrypoint.sh that choose the command (the
# security and performance-analyzer setup are left out).

export OPENSEARCH_HOME=/usr/share/opensearch
export OPENSEARCH_PATH_CONF=$OPENSEARCH_HOME/config

# Prepend "opensearch" command if no argument was provided or if the first
# argument looks like a flag (i.e. starts with a dash).
if [ $# -eq 0 ] || [ "${1:0:1}" = '-' ]; then
    set -- opensearch "$@"
fi

exec "$@"
