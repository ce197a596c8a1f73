#!/usr/bin/env bash
# Builds the libFuzzer fuzzers (tests/fuzz) with clang-14, AddressSanitizer and UBSan, and runs
# each for a while on a copy of its seed corpus (tests/fuzz/corpus/<name>). Exits non-zero when
# any fuzzer finds a crash, a leak, a timeout or a sanitizer report, and prints the reproducer.
#
#   deploy/run-fuzzers.sh [seconds-per-fuzzer]     (default 30)
#
# Reproduce a finding: build-fuzz/bin/fuzz_<name> <reproducer file>
# Environment: TESSERA_FUZZ_BUILD_DIR (default <repo>/build-fuzz), TESSERA_FUZZ_JOBS (build jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
seconds="${1:-30}"
build="${TESSERA_FUZZ_BUILD_DIR:-$repo/build-fuzz}"
jobs="${TESSERA_FUZZ_JOBS:-$(nproc)}"

for tool in clang-14 clang++-14; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "run-fuzzers: $tool is missing (deploy/install-deps.sh installs clang-14 libfuzzer-14-dev libclang-rt-14-dev)" >&2
    exit 2
  fi
done

# Only the fuzzers and the libraries they link are built: no CUDA, tests or benchmarks.
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
CC=clang-14 CXX=clang++-14 cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRENDER_CUDA=OFF -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF \
  -DTESSERA_BUILD_FUZZERS=ON -DTESSERA_WERROR=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" --target fuzzers -j "$jobs"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/tessera-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

failed=()
for fuzzer in "$build"/bin/fuzz_*; do
  [ -x "$fuzzer" ] || continue
  name=$(basename "$fuzzer")
  name=${name#fuzz_}
  [ "$name" = make_seeds ] && continue
  corpus="$scratch/corpus-$name"
  artifacts="$scratch/artifacts-$name"
  mkdir -p "$corpus" "$artifacts"
  # A copy: what the fuzzer adds never lands in the repository.
  if [ -d "$repo/tests/fuzz/corpus/$name" ]; then
    cp -r "$repo/tests/fuzz/corpus/$name/." "$corpus/"
  else
    echo "run-fuzzers: warning: no seed corpus tests/fuzz/corpus/$name" >&2
  fi
  log="$scratch/$name.log"
  echo "run-fuzzers: fuzz_$name for ${seconds} s"
  if "$fuzzer" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1; then
    grep -E '^(stat::number_of_executed_units|stat::new_units_added)' "$log" | tr '\n' ' ' || true
    echo
  else
    tail -n 60 "$log" >&2
    mkdir -p "$repo/build-fuzz-findings"
    for f in "$artifacts"/*; do
      [ -e "$f" ] || continue
      cp "$f" "$repo/build-fuzz-findings/${name}-$(basename "$f")"
      echo "run-fuzzers: fuzz_$name FAILED; reproducer: $repo/build-fuzz-findings/${name}-$(basename "$f")" >&2
      echo "run-fuzzers:   reproduce with: $fuzzer $repo/build-fuzz-findings/${name}-$(basename "$f")" >&2
    done
    failed+=("$name")
  fi
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "run-fuzzers: ${#failed[@]} fuzzer(s) found problems: ${failed[*]}" >&2
  exit 1
fi
echo "run-fuzzers: every fuzzer ran ${seconds} s without a finding"
