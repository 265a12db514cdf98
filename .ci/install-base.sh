#!/usr/bin/env bash
# Host packages every part of the test suite needs: debootstrap for base
# images. Idempotent; runs as root without standard input.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
need=()
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  apt_get update -qq
  apt_get install -y -qq "${need[@]}" >/dev/null
fi
