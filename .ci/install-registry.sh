#!/usr/bin/env bash
# Host packages the registry tests need: Debian's docker-registry (the
# distribution registry, started on 127.0.0.1 by the tests) and htpasswd
# from apache2-utils (bcrypt password files for its auth.htpasswd).
# Idempotent; runs as root without standard input.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
need=()
command -v docker-registry >/dev/null || need+=(docker-registry)
command -v htpasswd >/dev/null || need+=(apache2-utils)
if [ ${#need[@]} -gt 0 ]; then
  apt_get update -qq
  # The package's service is not wanted: the tests start their own registry.
  apt_get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
