#!/usr/bin/env bash
# Installs the Debian packages, builds everything (warnings are errors) and runs the whole test
# suite: unit, integration (real scheduler + workers on loopback) and end-to-end CLI tests.
# GPU tests skip with a message when no CUDA device is present.
set -euo pipefail
cd "$(dirname "$0")/.."

./deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_WERROR=ON >/dev/null
cmake --build build
cd build
ctest --output-on-failure --timeout 300 -j2
