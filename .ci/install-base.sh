#!/usr/bin/env bash
# Host packages every part of the test suite needs: debootstrap for base
# images. Idempotent; runs as root without standard input.
set -euo pipefail
need=()
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
