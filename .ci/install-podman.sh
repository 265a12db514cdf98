#!/usr/bin/env bash
# Podman for the Podman tests (tests/it/podman_tests.rs), from Debian:
# the tests start their own `podman system service` on a socket in a
# temporary directory, with its own storage, beside the Docker engine.
#
# Coexisting with Docker: nothing here starts a Podman service or touches
# Docker's configuration. The tests run Podman's containers with the host's
# network (containers.conf `netns = "host"`, written by the test harness
# into its own temporary CONTAINERS_CONF), so Podman never creates its CNI
# bridge or iptables chains next to Docker's. Recommends (buildah,
# dbus-user-session, …) are left out; runc comes with Docker.
# Idempotent; runs as root without standard input.
set -euo pipefail
need=()
command -v podman >/dev/null || need+=(podman)
# Rootful Podman with fuse-overlayfs storage (the Docker engine here uses
# fuse-overlayfs as well: no native overlay on this file system), and
# newuidmap/newgidmap for user namespaces.
command -v fuse-overlayfs >/dev/null || need+=(fuse-overlayfs)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v runc >/dev/null || command -v crun >/dev/null || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
