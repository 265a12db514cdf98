#!/usr/bin/env bash
# Installs what the Slurm tests (tests/it/slurm_tests.rs) need: Debian's
# Slurm (slurmctld, slurmd, the client commands) and MUNGE, which the tests
# start themselves as a one-node cluster of their own (their own config,
# state directories, munge socket and ports, ended by pid; the packages'
# services are not used), and kubernetes-validate from PyPI in a venv under
# the cache directory, for the Indexed Jobs of `plan --format k8s`.
# Idempotent; runs as root without standard input. scripts/test runs it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

if [ "$(id -u)" -ne 0 ]; then
    echo "install-slurm.sh: run as root" >&2
    exit 1
fi

need=()
for c in slurmctld slurmd munged sbatch; do
    command -v "$c" >/dev/null 2>&1 || need+=("$c")
done
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
    apt_get update -qq </dev/null
    # Where systemd runs, the packages' postinst starts munge (and tries
    # slurmctld/slurmd, which fail without a slurm.conf); where no init
    # system runs (a container) nothing starts. Either way the tests'
    # cluster does not meet them: its own munge socket and key, its own
    # ports, config, state and spool directories. A machine's own Slurm
    # is left alone.
    apt_get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge python3-venv </dev/null >/dev/null
fi

# kubernetes-validate: validates manifests offline against the schemas its
# wheel carries. In a venv of its own (Debian's python3 is externally
# managed), linked where the tests look: $ROCMATRIX_CI_TOOLS/bin.
tools=${ROCMATRIX_CI_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/rocmatrix-ci/venv}
if [ ! -x "$tools/bin/kubernetes-validate" ]; then
    python3 -m venv "$tools" </dev/null
    "$tools/bin/pip" install -q 'kubernetes-validate==1.37.0' </dev/null
fi
echo "install-slurm.sh: slurm $(dpkg-query -W -f '${Version}' slurmctld), kubernetes-validate $("$tools/bin/kubernetes-validate" --version 2>&1 | tail -1)"
