#!/usr/bin/env bash
# Podman for the Podman tests (tests/it/podman_tests.rs), from Debian:
# the tests start their own `podman system service` on a socket in a
# temporary directory, with its own storage, beside the Docker engine;
# rootful, and rootless as a user the test makes and deletes.
#
# Coexisting with Docker: nothing here starts a Podman service or touches
# Docker's configuration. Rootful Podman's containers use its CNI bridge
# cni-podman0 (10.88.0.0/16; Debian's containernetworking-plugins, not
# netavark), created on first use with nf_tables rules in CNI-* chains; the
# Docker engine here keeps its rules in iptables-legacy, and its bridge was
# checked to still reach the mirror beside Podman's. runc comes with Docker.
#
# Rootless Podman needs besides: uidmap (newuidmap/newgidmap, setuid, for
# the user namespace), slirp4netns (the rootless network namespace behind
# Podman's bridge), crun (the runtime that keeps the user's groups in a
# container: rootless GPU access; the rootful tests pin runc, since crun
# refuses hybrid cgroup hosts like these) and a /dev/net/tun every user may
# open.
# Idempotent; runs as root without standard input.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
need=()
command -v podman >/dev/null || need+=(podman)
# Rootful Podman with fuse-overlayfs storage (the Docker engine here uses
# fuse-overlayfs as well: no native overlay on this file system), and
# newuidmap/newgidmap for user namespaces.
command -v fuse-overlayfs >/dev/null || need+=(fuse-overlayfs)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v runc >/dev/null || need+=(runc)
command -v crun >/dev/null || need+=(crun)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
if [ ${#need[@]} -gt 0 ]; then
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# udev makes /dev/net/tun 0666 on an ordinary host; these machines have no
# udev and create it 0600, so slirp4netns fails for any user but root
# ("open(/dev/net/tun): Permission denied") and leaves a half-made rootless
# network namespace behind, after which every bridge container of that user
# fails with "failed to mount runtime directory for rootless netns".
if [ -c /dev/net/tun ]; then
  chmod 0666 /dev/net/tun
fi
