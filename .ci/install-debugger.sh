#!/usr/bin/env bash
# The host's gdb, for the unit tests of the backtrace capture
# (src/debugger/capture.rs runs an instrumented step script with bash and
# gdb, as a container would). Idempotent; runs as root without stdin.
set -euo pipefail
if ! command -v gdb >/dev/null 2>&1; then
  apt-get update -qq </dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gdb </dev/null >/dev/null
fi
echo "install-debugger.sh: $(gdb --version | head -n 1)"
