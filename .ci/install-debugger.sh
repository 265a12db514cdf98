#!/usr/bin/env bash
# The host's gdb, for the unit tests of the backtrace capture
# (src/debugger/capture.rs runs an instrumented step script with bash and
# gdb, as a container would). Idempotent; runs as root without stdin.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
if ! command -v gdb >/dev/null 2>&1; then
  apt_get update -qq </dev/null
  apt_get install -y -qq --no-install-recommends gdb </dev/null >/dev/null
fi
echo "install-debugger.sh: $(gdb --version | head -n 1)"
