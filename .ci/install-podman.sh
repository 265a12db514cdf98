#!/usr/bin/env bash
# Podman for the Podman tests (tests/it/podman_tests.rs), from Debian:
# the tests start their own `podman system service` on a socket in a
# temporary directory, with its own storage, beside the Docker engine.
#
# Coexisting with Docker: nothing here starts a Podman service or touches
# Docker's configuration. Podman's containers use its CNI bridge
# cni-podman0 (10.88.0.0/16; Debian's containernetworking-plugins, not
# netavark), created on first use with nf_tables rules in CNI-* chains; the
# Docker engine here keeps its rules in iptables-legacy, and its bridge was
# checked to still reach the mirror beside Podman's. Recommends (buildah,
# dbus-user-session, slirp4netns, …) are left out: rootless Podman is not
# tested yet. runc comes with Docker.
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
