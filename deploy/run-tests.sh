#!/usr/bin/env bash
# Installs the Debian packages, builds everything (warnings are errors) and runs the whole test
# suite: unit, integration (real scheduler + workers on loopback) and end-to-end CLI tests.
# GPU tests skip with a message when no CUDA device is present.
set -euo pipefail
cd "$(dirname "$0")/.."

./deploy/install-deps.sh
# Optimised like a release, without debug information (a third of the build time; a failing
# test prints its assertion, and a crash is rerun under a debug build by whoever fixes it).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DTESSERA_WERROR=ON >/dev/null
cmake --build build
cd build
ctest --output-on-failure --timeout 300 -j2
