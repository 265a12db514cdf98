#!/bin/bash
# Writes a seed corpus (fuzz/corpus/scan_bytes) from the real bundles the
# integration tests prepare, if they are cached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${ROCMATRIX_TEST_CACHE:-$here/../target/test-cache}
mkdir -p "$here/corpus/scan_bytes"
for f in "$cache"/gpu-bundles-*/*/ccob/*.bundle "$cache"/gpu-bundles-*/*/rocfft.hip_fatbin; do
    [ -f "$f" ] || continue
    # Keep seeds small: the first 64 KiB (headers and the start of payloads).
    head -c 65536 "$f" > "$here/corpus/scan_bytes/$(echo "$f" | sha256sum | cut -c1-16)"
done
ls "$here/corpus/scan_bytes" | wc -l
