#!/usr/bin/env bash
# Installs what the report tests (tests/it/report_*.rs) and the ingest
# benchmark need on a clean Debian bookworm machine. Run as root; idempotent;
# never reads stdin. The lead's .ci/run calls it before `cargo test`.
#
#   apt: chromium (HTML report in headless Chromium), libxml2-utils (xmllint,
#        junit-10.xsd validation), g++, googletest + libgtest-dev, catch2,
#        cmake (CTest), time (/usr/bin/time -v for the benchmark),
#        fonts-dejavu-core (glyphs in the screenshot), python3 + pip
#   PyPI: pytest (real pytest JUnit), junitparser (benchmark reference)
#   crates.io: cargo-nextest (real nextest JUnit)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
    echo "install-reports.sh: run as root" >&2
    exit 1
fi

apt_packages=(chromium libxml2-utils g++ make googletest libgtest-dev catch2 cmake time
              fonts-dejavu-core python3 python3-pip ca-certificates)
missing=()
for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt_get update -qq </dev/null
    apt_get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi

# pytest and junitparser from PyPI. Debian's python3 is "externally managed"
# (PEP 668), so pip needs --break-system-packages there; a pyenv or venv
# python does not.
py_missing=()
python3 -m pytest --version >/dev/null 2>&1 || py_missing+=(pytest)
command -v junitparser >/dev/null 2>&1 || py_missing+=(junitparser)
if [ "${#py_missing[@]}" -gt 0 ]; then
    python3 -m pip install -q "${py_missing[@]}" </dev/null \
        || python3 -m pip install -q --break-system-packages "${py_missing[@]}" </dev/null
fi

# cargo-nextest from crates.io (compiles for a few minutes the first time).
if ! cargo nextest --version >/dev/null 2>&1; then
    cargo install --locked cargo-nextest </dev/null
fi

echo "install-reports.sh: chromium $(chromium --version 2>/dev/null | awk '{print $2}'), \
$(xmllint --version 2>&1 | head -1), cmake $(cmake --version | awk 'NR==1{print $3}'), \
pytest $(python3 -m pytest --version 2>&1 | awk '{print $2}'), $(cargo nextest --version | head -1)"
