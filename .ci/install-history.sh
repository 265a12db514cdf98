#!/usr/bin/env bash
# Host packages the history tests need: Debian's PostgreSQL server, which
# the tests start themselves (initdb into a temporary directory, on a port
# of their own, as the postgres user) for the shared-history backend. The
# package's own cluster service is not used. And patch(1), with which the
# expect test applies a proposed diff. Idempotent; runs as root without
# standard input.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends postgresql >/dev/null
fi
if ! command -v patch >/dev/null; then
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends patch >/dev/null
fi
