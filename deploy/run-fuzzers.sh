#!/usr/bin/env bash
# Builds the libFuzzer fuzzers (tests/fuzz) with clang-14, AddressSanitizer and UBSan, and runs
# each for a while on a copy of its seed corpus (tests/fuzz/corpus/<name>). Exits non-zero when
# any fuzzer finds a crash, a leak, a timeout or a sanitizer report, and prints the reproducer.
#
#   deploy/run-fuzzers.sh [seconds-per-fuzzer]     (default 30)
#
# Reproduce a finding: build-fuzz/bin/fuzz_<name> <reproducer file>
# Environment: TESSERA_FUZZ_BUILD_DIR (default <repo>/build-fuzz), TESSERA_FUZZ_JOBS (build jobs, and
# fuzzers run at once; default: the number of cores).
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

# Only the fuzzers and the libraries they link are built: no CUDA, tests or benchmarks; line
# tables only (enough for the sanitizers' stack traces).
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
CC=clang-14 CXX=clang++-14 cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DRENDER_CUDA=OFF -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF \
  -DTESSERA_BUILD_FUZZERS=ON -DTESSERA_WERROR=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" --target fuzzers -j "$jobs"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/tessera-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

# One fuzzer: runs it on a copy of its seed corpus and reports; a finding is copied to
# build-fuzz-findings/ with the command that reproduces it. Returns non-zero on a finding.
run_one() {
  local fuzzer=$1 name=$2
  local corpus="$scratch/corpus-$name" artifacts="$scratch/artifacts-$name" log="$scratch/$name.log"
  mkdir -p "$corpus" "$artifacts"
  # A copy: what the fuzzer adds never lands in the repository.
  if [ -d "$repo/tests/fuzz/corpus/$name" ]; then
    cp -r "$repo/tests/fuzz/corpus/$name/." "$corpus/"
  else
    echo "run-fuzzers: warning: no seed corpus tests/fuzz/corpus/$name" >&2
  fi
  if "$fuzzer" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1; then
    echo "run-fuzzers: fuzz_$name ran ${seconds} s: $(grep -E '^(stat::number_of_executed_units|stat::new_units_added)' "$log" | tr '\n' ' ')"
    return 0
  fi
  tail -n 60 "$log" >&2
  mkdir -p "$repo/build-fuzz-findings"
  for f in "$artifacts"/*; do
    [ -e "$f" ] || continue
    cp "$f" "$repo/build-fuzz-findings/${name}-$(basename "$f")"
    echo "run-fuzzers: fuzz_$name FAILED; reproducer: $repo/build-fuzz-findings/${name}-$(basename "$f")" >&2
    echo "run-fuzzers:   reproduce with: $fuzzer $repo/build-fuzz-findings/${name}-$(basename "$f")" >&2
  done
  return 1
}

# The fuzzers are single-threaded: run as many at once as there are cores.
declare -A running=()
failed=()
reap() {
  local pid
  for pid in "${!running[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" || failed+=("${running[$pid]}")
      unset "running[$pid]"
    fi
  done
}
for fuzzer in "$build"/bin/fuzz_*; do
  [ -x "$fuzzer" ] || continue
  name=$(basename "$fuzzer")
  name=${name#fuzz_}
  [ "$name" = make_seeds ] && continue
  while [ ${#running[@]} -ge "$jobs" ]; do
    sleep 1
    reap
  done
  echo "run-fuzzers: fuzz_$name for ${seconds} s"
  run_one "$fuzzer" "$name" &
  running[$!]=$name
done
while [ ${#running[@]} -gt 0 ]; do
  sleep 1
  reap
done

if [ ${#failed[@]} -ne 0 ]; then
  echo "run-fuzzers: ${#failed[@]} fuzzer(s) found problems: ${failed[*]}" >&2
  exit 1
fi
echo "run-fuzzers: every fuzzer ran ${seconds} s without a finding"
