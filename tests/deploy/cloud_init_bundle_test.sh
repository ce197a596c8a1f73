#!/usr/bin/env bash
# The cloud-init templates (deploy/cloud-init/), run as far as they go without a cloud, each in
# a Debian 11 root file system with curl and systemd: the placeholders filled as the autoscaler
# fills them, the bundle served from this machine over HTTP, write_files written and runcmd run
# as the script cloud-init makes of it (its own shellify). No init runs in a chroot, so a
# stand-in systemctl records the calls. Then the worker is started as the installed unit says
# (ExecStart as its User, Group and SupplementaryGroups, in its state directory, without new
# privileges): it must enrol with the join token and register with a scheduler on this machine.
# The templates' `packages:` (renderers from the distribution) are not installed here.
#   cloud_init_bundle_test.sh BUILD_DIR BUNDLE_DIR SOURCE_DIR     (ctest: cloud_init_bundle_test)
# Skips (77) when the Debian package source cannot be reached (tests/deploy/rootfs.sh).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="$(cd "$1" && pwd)/bin"
BUNDLE_DIR="$2"
SOURCE="$3"
WORK="$(mktemp -d)"
# shellcheck source=tests/deploy/bundle_lib.sh
. "$HERE/bundle_lib.sh"
require_root_and_tools unshare chroot mknod curl cloud-init
# cloud-init's own Python modules, as the Debian package installs them.
PYTHON=/usr/bin/python3
"$PYTHON" -c 'import cloudinit.util, yaml' 2>/dev/null || require "cloud-init's Python modules"
archive="$(find "$BUNDLE_DIR" -maxdepth 1 -name 'tessera-worker-*-linux-x86_64.tar.gz' |
  head -n 1)"
[ -n "$archive" ] || fail "no bundle in $BUNDLE_DIR (bundle_make_test makes it)"

templates=("$SOURCE"/deploy/cloud-init/*.yaml)
for template in "${templates[@]}"; do
  copy_rootfs bullseye cloud "$WORK/$(basename "$template" .yaml)"
done
start_scheduler
port="$(free_port)"
"$PYTHON" -m http.server --bind 127.0.0.1 --directory "$(dirname "$archive")" "$port" \
  > "$WORK/http.log" 2>&1 &
PIDS+=($!)

for template in "${templates[@]}"; do
  name="$(basename "$template" .yaml)"
  ROOT="$WORK/$name"
  export TESSERA_SCHEDULER_ADDRESS="$BROKER" TESSERA_SCHEDULER_PUBLIC_KEY="$SCHEDULER_KEY"
  TESSERA_JOIN_TOKEN="$(join_token 10m 1)"
  export TESSERA_JOIN_TOKEN TESSERA_POOLS="[cloud-init]" TESSERA_TAGS="[]"
  export TESSERA_WORKER_NAME="ci-$name" TESSERA_CLOUD_PROVIDER=none
  TESSERA_PACKAGE_URL="http://127.0.0.1:$port/$(basename "$archive")"
  export TESSERA_PACKAGE_URL
  # The user data as a node gets it, checked by cloud-init; then its files and its script.
  "$PYTHON" - "$template" "$ROOT" "$WORK/$name.user-data" <<'EOF'
import os, re, sys
import yaml
from cloudinit.util import shellify
template, root, user_data = sys.argv[1:]
text = re.sub(r'\$\{(TESSERA_[A-Z_]+)\}', lambda m: os.environ[m.group(1)], open(template).read())
open(user_data, 'w').write(text)
config = yaml.safe_load(text)
for entry in config['write_files']:
    path = root + entry['path']
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(entry['content'])
    os.chmod(path, int(entry.get('permissions', '0644'), 8))
script = root + '/var/lib/cloud/instance/scripts/runcmd'
os.makedirs(os.path.dirname(script), exist_ok=True)
with open(script, 'w') as f:
    f.write(shellify(config['runcmd']))
os.chmod(script, 0o700)
EOF
  cloud-init schema --config-file "$WORK/$name.user-data" > /dev/null ||
    fail "$name: the rendered user data is not valid cloud-config"
  cat > "$ROOT/usr/local/sbin/systemctl" <<'EOF'
#!/bin/sh
echo "$*" >> /var/log/systemctl-calls
EOF
  chmod 0755 "$ROOT/usr/local/sbin/systemctl"
  in_root /var/lib/cloud/instance/scripts/runcmd > "$WORK/$name.runcmd.log" 2>&1 ||
    { cat "$WORK/$name.runcmd.log" >&2; fail "$name: runcmd failed"; }
  for call in "daemon-reload" "enable --now tessera-worker"; do
    grep -qx "$call" "$ROOT/var/log/systemctl-calls" ||
      fail "$name: no systemctl $call: $(cat "$ROOT/var/log/systemctl-calls")"
  done
  mode="$(in_root stat -c '%a %U %G' /etc/tessera/worker.yaml)"
  [ "$mode" = "640 root tessera" ] || fail "$name: /etc/tessera/worker.yaml is $mode"

  # The unit as systemd would run it.
  unit="$ROOT/usr/local/lib/systemd/system/tessera-worker.service"
  key() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
  state="/var/lib/$(key StateDirectory)"
  install -d -m "$(key StateDirectoryMode)" "$ROOT$state"
  in_root chown "$(key User):$(key Group)" "$state"
  [ "$(key WorkingDirectory)" = "$state" ] || fail "$name: the unit works outside its state directory"
  groups="$(key SupplementaryGroups)"
  root_command setpriv --reuid="$(key User)" --regid="$(key Group)" --groups="${groups// /,}" \
    --no-new-privs -- env "$(key Environment)" sh -c "cd '$state' && exec $(key ExecStart)"
  "${CMD[@]}" > "$WORK/$name.worker.log" 2>&1 &
  PIDS+=($!)
  wait_for_line "$WORK/$name.worker.log" "registered with" 60 ||
    { cat "$WORK/$name.worker.log" >&2; fail "$name: the worker did not register"; }
  grep -q "enrolled as worker ci-$name" "$WORK/$name.worker.log" ||
    fail "$name: the worker did not enrol with the join token"
  "$BIN/tessera" workers | grep -q "ci-$name" || fail "$name: the scheduler does not list ci-$name"
  echo "$name: runcmd installed the bundle; the unit's worker enrolled and registered as ci-$name"
done
echo "PASS"
