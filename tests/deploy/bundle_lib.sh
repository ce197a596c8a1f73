# shellcheck shell=bash disable=SC2034  # SERVER, BROKER, SCHEDULER_KEY are for the callers
# What the worker bundle's tests share (sourced): a scheduler on this machine, join
# tokens, copies of cached Debian root file systems, and a worker started inside one.
# The caller sets BIN (the build's bin/ folder) and WORK (a scratch folder removed at exit).

# Exit codes ctest knows: 77 skips (SKIP_RETURN_CODE), anything else but 0 fails.
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() {
  echo "SKIP: $*" >&2
  exit 77
}
# A need this machine lacks: skipped on a developer's machine, a failure under CI=true, where
# deploy/install-deps.sh provides everything (tests/support/require.h says the same for C++).
require() {
  case "${CI:-}" in
    true | TRUE | True | 1 | yes) fail "required under CI=true: $*" ;;
  esac
  skip "$* (under CI=true this fails)"
}
require_root_and_tools() {
  [ "$(id -u)" = 0 ] || require "needs root (chroot, mount namespaces)"
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || require "$tool is not installed"
  done
  # Root in a container may still lack them (CAP_SYS_ADMIN, CAP_MKNOD).
  unshare --mount --propagation private true 2>/dev/null ||
    require "mount namespaces cannot be made here"
  mknod "$WORK/probe-null" c 1 3 2>/dev/null || require "device nodes cannot be made here"
  rm -f "$WORK/probe-null"
}

# Background processes to stop at exit: SIGTERM (an idle worker leaves at once), SIGKILL for
# what is left after 10 s. (SIGINT would not do: background jobs of a script ignore it.)
PIDS=()
cleanup() {
  local pid="" i
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < 50; i++)); do
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && break; done
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to $3 seconds for file $1 to hold a line matching the extended regex $2.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 5; i++)); do
    grep -Eq "$2" "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# A CURVE scheduler with API tokens on loopback, data in $WORK/scheduler. Sets SERVER, BROKER
# and TESSERA_TOKEN_FILE (for the CLI), and SCHEDULER_KEY (its public key, hex).
start_scheduler() {
  local api broker data="$WORK/scheduler"
  api="$(free_port)"
  broker="$(free_port)"
  mkdir -p "$data"
  "$BIN/tessera-scheduler" --data "$data" --api "127.0.0.1:$api" \
    --broker "tcp://127.0.0.1:$broker" --log-level info > "$WORK/scheduler.log" 2>&1 &
  PIDS+=($!)
  SERVER="http://127.0.0.1:$api"
  BROKER="tcp://127.0.0.1:$broker"
  export TESSERA_SERVER="$SERVER" TESSERA_TOKEN_FILE="$data/admin.token"
  local i
  for ((i = 0; i < 100; i++)); do
    curl -fs "$SERVER/healthz" >/dev/null 2>&1 && [ -s "$data/admin.token" ] && break
    sleep 0.2
  done
  curl -fs "$SERVER/healthz" >/dev/null || { cat "$WORK/scheduler.log" >&2; fail "no scheduler"; }
  SCHEDULER_KEY="$("$BIN/tessera-scheduler" --data "$data" --print-public-key)"
}

# A join token: join_token TTL (e.g. 10m, 1s) USES (0: unlimited).
join_token() {
  "$BIN/tessera" join-token create --ttl "$1" --uses "$2" --note "bundle test" |
    grep -Eo 'tsrj-[0-9A-Za-z_-]+' | head -n 1
}

# A fresh copy of the cached root file system of Debian RELEASE, VARIANT at $3; skips when the
# package source cannot be reached (tests/deploy/rootfs.sh).
copy_rootfs() {
  local cached status=0
  cached="$("$HERE/rootfs.sh" "$1" "$2")" || status=$?
  [ "$status" = 77 ] && skip "no Debian $1 root file system: the package source cannot be reached"
  [ "$status" = 0 ] || fail "could not make the Debian $1 $2 root file system"
  cp -a "$cached" "$3"
  # Devices every program expects; the rest of /dev is the machine's business.
  local dev
  for dev in null:1:3 zero:1:5 random:1:8 urandom:1:9; do
    IFS=: read -r name major minor <<<"$dev"
    rm -f "$3/dev/$name"
    mknod -m 0666 "$3/dev/$name" c "$major" "$minor"
  done
}

# Sets CMD to the command that runs "$@" inside root file system $ROOT, in a mount namespace with
# /proc and /sys mounted (NO_PROC=1 leaves /proc out), with a clean environment. Every step
# execs the next: started with "${CMD[@]}" &, $! is the program's own process.
root_command() {
  local mounts="mount -t sysfs -o ro sysfs '$ROOT/sys'"
  [ -n "${NO_PROC:-}" ] || mounts="mount -t proc proc '$ROOT/proc' && $mounts"
  CMD=(unshare --mount --propagation private -- sh -c "$mounts && exec \"\$@\"" in_root
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
    LANG=C.UTF-8 chroot "$ROOT" "$@")
}
in_root() {
  root_command "$@"
  "${CMD[@]}"
}
