#!/bin/bash
# Host prerequisites of the GPU / offload-bundle tests (issue 4). Idempotent,
# runs as root, reads no stdin.
#
# The tests need no host package of their own: objcopy, clang-offload-bundler
# and the Debian ROCm libraries are fetched inside debian:trixie and
# debian:sid containers by tests/it/data/gpu-artifacts.sh. What they need is
# the docker CLI and engine, those two base images (the test harness
# bootstraps them when the engine lacks them) and HTTP access to
# deb.debian.org from containers. This script checks that
# and says what is missing; it changes nothing that is already in place.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
export DEBIAN_FRONTEND=noninteractive

if ! command -v docker >/dev/null 2>&1; then
    echo "install-gpu: installing the docker CLI" >&2
    apt_get update -qq </dev/null
    apt_get install -y -qq --no-install-recommends docker-cli </dev/null \
        || apt_get install -y -qq --no-install-recommends docker.io </dev/null
fi
if ! docker info >/dev/null 2>&1; then
    echo "install-gpu: warning: the Docker engine is not reachable; the real-data" \
         "bundle tests will skip (or fail under ROCMATRIX_REQUIRE_DOCKER=1)" >&2
    exit 0
fi
for image in debian:trixie debian:sid; do
    if ! docker image inspect "$image" >/dev/null 2>&1; then
        echo "install-gpu: $image is not in the engine; the tests will bootstrap it" \
             "(tests/it/harness/bases.rs; debootstrap, 1-3 minutes) and remove it afterwards" >&2
    fi
done
echo "install-gpu: ok"
