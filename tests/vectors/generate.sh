#!/bin/bash
# Compile gen_verify_vectors.c together with Open vSwitch's own lib/jhash.c,
# taken from the OVS source tarball, and print the test vectors (JSON) on stdout.
#
#   tests/vectors/generate.sh > tests/vectors/verify.json
#
# Environment: OVS_TARBALL (default /usr/src/openvswitch/openvswitch.tar.gz,
# Debian package openvswitch-source), CC (default gcc).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tarball=${OVS_TARBALL:-/usr/src/openvswitch/openvswitch.tar.gz}
cc=${CC:-gcc}
[ -r "$tarball" ] || { echo "generate.sh: OVS source tarball $tarball not found" >&2; exit 2; }
command -v "$cc" >/dev/null || { echo "generate.sh: compiler $cc not found" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
top=$(tar tzf "$tarball" | awk -F/ 'NR == 1 { print $1 }')
tar xzf "$tarball" -C "$tmp" "$top/lib" "$top/include"
# jhash.c needs only a (here empty) config.h plus OVS's own headers.
: > "$tmp/config.h"
"$cc" -O2 -std=gnu99 -Wall -I"$tmp" -I"$tmp/$top/include" -I"$tmp/$top/lib" \
    -o "$tmp/gen" "$here/gen_verify_vectors.c" "$tmp/$top/lib/jhash.c"
"$tmp/gen"
