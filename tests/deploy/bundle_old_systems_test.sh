#!/usr/bin/env bash
# The worker bundle on older and barer systems than the one it was built on: root file systems
# of Debian 11 (C library 2.31, the generation of Ubuntu 20.04) as debootstrap makes them,
# "minbase" (the base system, no library beyond it) and "cloud" (with curl and systemd). In
# each, the bundle is unpacked into /usr/local (in minbase over an older bundle), and the worker,
# started in a chroot with its own mount namespace, enrols with a scheduler on this machine
# over CURVE with a join token and renders the example job with the path tracer on the CPU: the
# frames must equal those of this build's worker on this machine. A command job shows that a
# program the worker starts runs on the system's own C library, with no bundle path in its
# environment. Then what operators get wrong: no /proc, no NVIDIA driver, an expired join token,
# a scheduler key that is not the scheduler's: each a clear message and an exit status.
# The NVIDIA driver's libraries stay the system's: in "cloud" stand-ins for an old driver's
# libcuda and for libnvidia-ml (the tests' fake NVML) sit where only the system's loader cache
# finds them, and the bundled worker must find them there.
#   bundle_old_systems_test.sh BUILD_DIR BUNDLE_DIR SOURCE_DIR FAKE_NVML
#                                                   (ctest: bundle_old_systems_test)
# Skips (77) when the Debian package source cannot be reached: the root file systems come from
# it once, then from the cache (tests/deploy/rootfs.sh).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$(cd "$1" && pwd)/bin"
BUNDLE_DIR="$2"
SOURCE="$3"
FAKE_NVML="$4"
WORK="$(mktemp -d)"
# shellcheck source=tests/deploy/bundle_lib.sh
. "$HERE/bundle_lib.sh"
require_root_and_tools unshare chroot mknod curl python3 idiff cc
[ -f "$FAKE_NVML" ] || fail "no fake NVML at $FAKE_NVML (target tsr_fake_nvml)"
archive="$(find "$BUNDLE_DIR" -maxdepth 1 -name 'tessera-worker-*-linux-x86_64.tar.gz' 2>/dev/null |
  head -n 1)"
[ -n "$archive" ] || fail "no bundle in $BUNDLE_DIR (bundle_make_test makes it)"
version="${archive##*/tessera-worker-}"
version="${version%-linux-x86_64.tar.gz}"

# Both root file systems first: a skip for want of the package source comes before any work.
for variant in minbase cloud; do copy_rootfs bullseye "$variant" "$WORK/$variant"; done

start_scheduler
token="$(join_token 30m 0)"
[ -n "$token" ] || fail "no join token"

# An older bundle under the new one in minbase: another version's launchers and payload.
older="$WORK/older"
mkdir -p "$older"
tar -xzf "$archive" -C "$older"
mv "$older/lib/tessera-worker/$version" "$older/lib/tessera-worker/0.0.0"
sed -i "s/^version=.*/version=0.0.0/" "$older/bin/tessera-worker" "$older/bin/tessera"
cp -a "$older/." "$WORK/minbase/usr/local/"

# A driver in a folder only the system's loader cache names, as Red Hat's packages install it:
# libcuda of a driver for CUDA 11.4 (too old for any runtime this builds with) and the fake NVML.
nvidia="$WORK/cloud/opt/nvidia/lib64"
mkdir -p "$nvidia"
printf '%s\n' 'int cuDriverGetVersion(int* v) { *v = 11040; return 0; }' \
  'int cuInit(unsigned int flags) { (void)flags; return 3; }' > "$WORK/fake-cuda.c"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$nvidia/libcuda.so.1" "$WORK/fake-cuda.c"
cp "$FAKE_NVML" "$nvidia/libnvidia-ml.so.1"
echo /opt/nvidia/lib64 > "$WORK/cloud/etc/ld.so.conf.d/nvidia.conf"
echo '{"gpus": [{"util": 42, "mem_used_mb": 1024, "mem_total_mb": 24576}]}' \
  > "$WORK/cloud/etc/fake-nvml.json"
chroot "$WORK/cloud" ldconfig

for variant in minbase cloud; do
  ROOT="$WORK/$variant"
  tar -xzf "$archive" -C "$ROOT/usr/local" --no-same-owner --no-overwrite-dir
  mkdir -p "$ROOT/etc/tessera" "$ROOT/usr/local/libexec"
  cat > "$ROOT/etc/tessera/worker.yaml" <<EOF
scheduler: {address: "$BROKER", public_key: "$SCHEDULER_KEY", join_token: "$token"}
worker:
  name: bundle-$variant
  backend: auto
  pools: [bundle-$variant]
  data_dir: /var/lib/tessera-worker
  command_programs: [/usr/local/libexec/tessera-probe]
EOF
  # A program the worker starts: what it was given and what it runs on.
  cat > "$ROOT/usr/local/libexec/tessera-probe" <<'EOF'
#!/bin/sh
env > env.txt
cat "/proc/$$/maps" > maps.txt
ldd --version > ldd.txt 2>&1
EOF
  chmod 0755 "$ROOT/usr/local/libexec/tessera-probe"
  root_command /usr/local/bin/tessera-worker --config /etc/tessera/worker.yaml
  "${CMD[@]}" > "$WORK/worker-$variant.log" 2>&1 &
  PIDS+=($!)
  eval "pid_$variant=$!"
done
TESSERA_SCHEDULER_JOIN_TOKEN="$token" "$BIN/tessera-worker" --scheduler "$BROKER" \
  --public-key "$SCHEDULER_KEY" --data-dir "$WORK/host-worker" --name host --pool host \
  --backend cpu > "$WORK/worker-host.log" 2>&1 &
PIDS+=($!)

for who in minbase cloud host; do
  wait_for_line "$WORK/worker-$who.log" "registered with" 60 ||
    { cat "$WORK/worker-$who.log" >&2; fail "the $who worker did not register"; }
done
# pid_minbase, pid_cloud: the workers themselves (every step from unshare on is an exec).
# shellcheck disable=SC2154
for pid in "$pid_minbase" "$pid_cloud"; do
  grep -q "/usr/local/lib/tessera-worker/$version/lib/libc.so.6" "/proc/$pid/maps" ||
    fail "worker $pid does not run on the bundled C library"
done
# Without a driver, and with an old one found through the system's loader cache (a build
# without CUDA says so instead).
if grep -q "built without CUDA" "$WORK/worker-minbase.log"; then
  echo "this build has no CUDA backend: the workers do not look for libcuda"
else
  grep -q "no CUDA devices (no NVIDIA driver: libcuda.so.1: cannot open" \
    "$WORK/worker-minbase.log" || fail "a worker without the NVIDIA driver does not say so:" \
    "$(grep -i cuda "$WORK/worker-minbase.log")"
  grep -q "the NVIDIA driver supports CUDA up to 11.4, older than" "$WORK/worker-cloud.log" ||
    fail "the bundled worker did not find the system's libcuda: $(grep -i cuda "$WORK/worker-cloud.log")"
fi

# The example's first two frames on each worker.
example="$SOURCE/deploy/examples/bouncing-spheres"
declare -A jobs
for pool in host bundle-minbase bundle-cloud; do
  mkdir -p "$WORK/jobs/$pool"
  cp "$example/scene.yaml" "$WORK/jobs/$pool/"
  sed -e "s/^name: .*/name: spheres-$pool/" -e 's/^frames: .*/frames: 1-2/' \
    "$example/job.yaml" > "$WORK/jobs/$pool/job.yaml"
  echo "pools: [$pool]" >> "$WORK/jobs/$pool/job.yaml"
  jobs[$pool]="$("$BIN/tessera" submit "$WORK/jobs/$pool/job.yaml")"
done
for variant in minbase cloud; do
  cat > "$WORK/jobs/probe-$variant.yaml" <<EOF
name: probe-$variant
renderer: command
frames: 1
pools: [bundle-$variant]
settings: {program: /usr/local/libexec/tessera-probe, outputs: files,
           files: [env.txt, maps.txt, ldd.txt]}
EOF
  jobs[probe-$variant]="$("$BIN/tessera" submit "$WORK/jobs/probe-$variant.yaml")"
done
# A job's output folder (the API may name it relative to the scheduler's output root).
output_dir() {
  "$BIN/tessera" status --json "$1" | python3 -c '
import json, os, sys
status = json.load(sys.stdin)
print(os.path.join(sys.argv[1], status.get("job", status)["output_dir"]))' "$WORK/scheduler/outputs"
}
for name in "${!jobs[@]}"; do
  "$BIN/tessera" wait --quiet --timeout 600 "${jobs[$name]}" ||
    { tail -n 20 "$WORK"/worker-*.log >&2; fail "job $name (${jobs[$name]}) did not finish"; }
done

host_frames="$(output_dir "${jobs[host]}")"
for variant in minbase cloud; do
  frames="$(output_dir "${jobs[bundle-$variant]}")"
  for frame in spheres.0001.exr spheres.0002.exr spheres.0001.png spheres.0002.png; do
    idiff -fail 0 -warn 0 "$host_frames/$frame" "$frames/$frame" > "$WORK/idiff.out" ||
      { cat "$WORK/idiff.out" >&2; fail "$frame from the $variant bundle differs from this build's"; }
  done
  echo "$variant: frames 1-2 equal this build's"

  probe="$(output_dir "${jobs[probe-$variant]}")"
  if grep -E '^LD_|/usr/local/lib/tessera-worker' "$probe/env.txt"; then
    fail "a program started by the bundled worker sees the bundle in its environment"
  fi
  grep -q 'GLIBC 2.31' "$probe/ldd.txt" || fail "not Debian 11's C library: $(head -n 1 "$probe/ldd.txt")"
  grep -Eq ' /(usr/)?lib/x86_64-linux-gnu/libc-2\.31\.so$' "$probe/maps.txt" ||
    fail "a program started by the bundled worker does not run on the system's libc"
  if grep /usr/local/lib/tessera-worker "$probe/maps.txt"; then
    fail "a program started by the bundled worker loaded the bundle's libraries"
  fi
  echo "$variant: a renderer runs on the system's own C library, with a clean environment"
done

# A drain (SIGTERM) ends each bundled worker with exit 0, nothing left-out ever called.
for variant in minbase cloud; do
  pid="pid_$variant"
  kill -TERM "${!pid}"
  status=0
  wait "${!pid}" || status=$?
  [ "$status" = 0 ] || fail "the $variant worker exited $status after SIGTERM"
  if grep "this bundle leaves" "$WORK/worker-$variant.log"; then fail "a placeholder was called"; fi
done

# What operators get wrong, each in minbase with its own data folder.
ROOT="$WORK/minbase"
try_worker() { # EXPECTED_STATUS MESSAGE_REGEX WHAT ARGS...
  local expected="$1" message="$2" what="$3" status=0
  shift 3
  "$@" > "$WORK/try.log" 2>&1 || status=$?
  if [ "$status" != "$expected" ] || ! grep -Eq "$message" "$WORK/try.log"; then
    cat "$WORK/try.log" >&2
    fail "$what: exit $status, expected $expected and /$message/"
  fi
  echo "$what: exit $status: $(grep -E "$message" "$WORK/try.log" | head -n 1)"
}
worker=(timeout -k 5 60 /usr/local/bin/tessera-worker --config /etc/tessera/worker.yaml)
ROOT="$ROOT" NO_PROC=1 try_worker 2 "/proc is not mounted" "no /proc" \
  in_root "${worker[@]}" --data-dir /var/lib/no-proc
expired="$(join_token 1s 1)"
sleep 2
ROOT="$ROOT" try_worker 1 "refused the join token.*expired" "an expired join token" \
  in_root "${worker[@]}" --data-dir /var/lib/expired --name expired --join-token "$expired"
other_key="$(python3 -c 'import os; print(os.urandom(32).hex())')"
ROOT="$ROOT" try_worker 1 "not that scheduler's key" "another scheduler's key" \
  in_root "${worker[@]}" --data-dir /var/lib/other-key --name other-key --public-key "$other_key"
ROOT="$ROOT" try_worker 2 "no usable CUDA device" "backend cuda without a driver" \
  in_root "${worker[@]}" --data-dir /var/lib/cuda --name cuda --backend cuda
[ -d "$ROOT/usr/local/lib/tessera-worker/0.0.0" ] || fail "the older bundle was not there"
# The system's libnvidia-ml, for a worker with (simulated) GPUs: found through the loader cache.
ROOT="$WORK/cloud" try_worker 124 "GPU telemetry through libnvidia-ml.so.1" \
  "libnvidia-ml from the system" in_root env TESSERA_WORKER_SIMULATE_GPUS=1 \
  TESSERA_FAKE_NVML=/etc/fake-nvml.json timeout -k 5 8 /usr/local/bin/tessera-worker \
  --config /etc/tessera/worker.yaml --data-dir /var/lib/nvml --name nvml --pool nvml
echo "PASS"
