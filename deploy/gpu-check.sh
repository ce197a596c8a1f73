#!/usr/bin/env bash
# On a machine with an NVIDIA GPU (driver + CUDA toolkit with nvcc): builds with the CUDA
# backend forced on, runs the GPU tests (CUDA against the CPU backend, label `gpu`) and prints
# the path tracer's throughput on the GPU for each bench scene.
#
#   deploy/gpu-check.sh            # build dir: build-gpu
#   BUILD_DIR=build deploy/gpu-check.sh
#
# CUDA-vs-CPU tolerance (tests/plugins/pathtracer/gpu_test.cpp): per channel, image means within
# 1% and >= 95% of values within 1e-3 * (1 + |cpu|); the GPU's own tiles/sample parts/resume are
# bit-identical to its whole frame.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build-gpu}"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU/driver found (nvidia-smi); nothing to check" >&2
  exit 2
fi
nvidia-smi -L
NVCC="${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
[[ -x "$NVCC" ]] || { echo "gpu-check: nvcc not found (set CUDACXX)" >&2; exit 2; }

# Build only for the GPU present unless told otherwise (much faster than every architecture).
ARCH="${CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_WERROR=ON \
  -DRENDER_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$ARCH" >/dev/null
cmake --build "$BUILD_DIR" --target pathtracer_gpu_test pathtracer_test tessera-bench

(cd "$BUILD_DIR" && ctest -L gpu --output-on-failure --timeout 300)

status=0
for scene in box cornell mesh; do
  "$BUILD_DIR/bin/tessera-bench" render --backend cuda --scene "$scene" --seconds 2 | tail -n 1 ||
    status=1
done
exit "$status"
