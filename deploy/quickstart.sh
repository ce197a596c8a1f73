#!/usr/bin/env bash
# From a fresh clone to rendered frames in one command: installs the Debian packages, builds the
# three binaries, starts a local farm (a scheduler and two workers, data under ./tessera-data),
# renders the bundled example job, prints where the images are, and stops the farm.
set -euo pipefail
cd "$(dirname "$0")/.."

DATA_DIR="${TESSERA_DATA:-$PWD/tessera-data}"
PORT="${TESSERA_PORT:-8470}"
JOB="deploy/examples/bouncing-spheres/job.yaml"

./deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=OFF >/dev/null
cmake --build build --target tessera tessera-scheduler tessera-worker

TESSERA=build/bin/tessera
SERVER="http://127.0.0.1:$PORT"
mkdir -p "$DATA_DIR"
"$TESSERA" up --workers 2 --data "$DATA_DIR" --port "$PORT" > "$DATA_DIR/up.log" 2>&1 &
FARM_PID=$!
trap 'kill -INT $FARM_PID 2>/dev/null; wait $FARM_PID 2>/dev/null || true' EXIT

for _ in $(seq 1 150); do
  grep -q "farm ready" "$DATA_DIR/up.log" 2>/dev/null && break
  kill -0 $FARM_PID 2>/dev/null || { cat "$DATA_DIR/up.log"; exit 1; }
  sleep 0.2
done
grep "farm ready" "$DATA_DIR/up.log" || { echo "the local farm did not start:"; cat "$DATA_DIR/up.log"; exit 1; }

JOB_ID=$("$TESSERA" submit --server "$SERVER" "$JOB")
echo "submitted job $JOB_ID ($JOB)"
SECONDS=0
"$TESSERA" wait --server "$SERVER" "$JOB_ID"
elapsed=$SECONDS
OUT=$("$TESSERA" status --server "$SERVER" --json "$JOB_ID" | sed -n 's/.*"output_dir": *"\([^"]*\)".*/\1/p')
echo "rendered in ${elapsed} s; frames are in $OUT:"
ls "$OUT"
echo "dashboard while a farm runs: $SERVER/  (start one with: $TESSERA up)"
