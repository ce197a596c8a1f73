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

# The worker bundle's tests run it in Debian 11 root file systems, made once per machine from
# this machine's Debian package source and cached (tests/deploy/rootfs.sh); this says, here in
# the log, when they cannot be made and those tests will skip.
if [ "$(id -u)" = 0 ]; then
  for variant in minbase cloud; do
    status=0
    tests/deploy/rootfs.sh bullseye "$variant" > /dev/null || status=$?
    if [ "$status" = 77 ]; then
      echo "run-tests: no Debian 11 $variant root file system: the package source cannot be" \
        "reached, so bundle_old_systems_test and cloud_init_bundle_test are skipped"
    fi
  done
fi
cd build
ctest --output-on-failure --timeout 300 -j2
