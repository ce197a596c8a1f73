#!/bin/sh
# @PROGRAM@ from the Tessera worker bundle @VERSION@ (made by deploy/bundle.sh): runs the program
# with the C library, dynamic loader and libraries unpacked beside it, so it runs on any x86_64
# Linux whatever its C library and with nothing installed.
#
# The bundled loader is started explicitly with --library-path, which applies to this process
# alone: nothing is added to the environment, so the renderers the worker starts run with this
# system's own loader and libraries. Libraries the bundle does not carry, such as the NVIDIA
# driver's libcuda and libnvidia-ml, are found where this system's loader cache says.
program=@PROGRAM@
version=@VERSION@
bundle=@BUNDLE@

fail() {
  echo "$program: $*" >&2
  exit 2
}

case $0 in
  */*) self=$0 ;;
  *) self=$(command -v -- "$0") || fail "cannot find $0 on PATH" ;;
esac
# Through symbolic links, e.g. /usr/local/bin/$program -> /opt/tessera/bin/$program.
resolved=$(readlink -f -- "$self" 2>/dev/null) && self=$resolved
root=${self%/bin/*}
dir=$root/lib/tessera-worker/$version

machine=$(uname -m)
[ "$machine" = x86_64 ] ||
  fail "this bundle is for x86_64 Linux; this machine is $machine"
# The archive's last member: missing or from another build when unpacking stopped part way, or
# when an older bundle of the same version was only partly overwritten.
found=
read -r found 2>/dev/null <"$dir/bundle-id" || true
[ "$found" = "$bundle" ] ||
  fail "the bundle in $dir is incomplete or mixed with another build (bundle-id '$found'," \
    "expected '$bundle'): unpack tessera-worker-$version-linux-x86_64.tar.gz into $root again"

if [ "$program" = tessera ] && [ -z "${SSL_CERT_FILE-}" ]; then
  # The bundled OpenSSL looks for CA certificates where Debian keeps them; elsewhere, name this
  # system's bundle (Red Hat family, SUSE) for HTTPS servers.
  for file in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt \
    /etc/ssl/ca-bundle.pem; do
    if [ -r "$file" ]; then
      SSL_CERT_FILE=$file
      export SSL_CERT_FILE
      break
    fi
  done
fi

exec "$dir/ld-linux-x86-64.so.2" --library-path "$dir/lib" --argv0 "$0" "$dir/bin/$program" "$@"
