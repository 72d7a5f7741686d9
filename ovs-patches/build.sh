#!/bin/bash
# Build (or reuse) Open vSwitch 3.1 with the PAZZ patch series.
#
#   PREFIX=$(ovs-patches/build.sh)
#
# Prints ONLY the install prefix on stdout.  The prefix is
#   ${PAZZ_OVS_CACHE:-/var/cache/pazz}/ovs-3.1-<sha256(series + build.sh), 12 hex>
# and the build is skipped when $PREFIX/.complete exists.  Build logs go to
# a log file next to the prefix; its path is printed on stderr on failure.
#
# Environment:
#   PAZZ_OVS_CACHE  cache directory (default /var/cache/pazz)
#   OVS_TARBALL     source tarball (default /usr/src/openvswitch/openvswitch.tar.gz,
#                   Debian package openvswitch-source)
#   PAZZ_OVS_NO_APT set to 1 to never call apt-get
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tarball=${OVS_TARBALL:-/usr/src/openvswitch/openvswitch.tar.gz}
cache=${PAZZ_OVS_CACHE:-/var/cache/pazz}

die() { echo "ovs-patches/build.sh: $*" >&2; exit 1; }

shopt -s nullglob
patches=("$here"/[0-9][0-9][0-9][0-9]-*.patch)
shopt -u nullglob
hash=$(cat "$here/build.sh" "${patches[@]}" | sha256sum | cut -c1-12)
prefix=$cache/ovs-3.1-$hash

if [ -e "$prefix/.complete" ]; then
    echo "$prefix"
    exit 0
fi

mkdir -p "$cache" || die "cannot create cache directory $cache"
log=$cache/build-$hash.log
: > "$log" || die "cannot write $log"

# One build per series at a time; a second caller waits and reuses it.
exec 9> "$cache/.lock-$hash"
flock 9
if [ -e "$prefix/.complete" ]; then
    echo "$prefix"
    exit 0
fi

fail() {
    echo "ovs-patches/build.sh: $* (log: $log)" >&2
    tail -n 30 "$log" >&2 || true
    exit 1
}

# Build dependencies (the tarball ships a generated configure script, so
# autotools are not needed).
need_pkgs=()
for p in gcc make libc6-dev python3 patch; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
    [ "${PAZZ_OVS_NO_APT:-0}" = 1 ] && die "missing build packages: ${need_pkgs[*]}"
    echo "ovs-patches/build.sh: installing ${need_pkgs[*]}" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"; } >> "$log" 2>&1 \
        || fail "apt-get install ${need_pkgs[*]} failed"
fi
[ -r "$tarball" ] || die "OVS source tarball $tarball not found (apt-get install openvswitch-source)"

build=$cache/build-$hash
rm -rf "$build" "$prefix"
mkdir -p "$build"
echo "ovs-patches/build.sh: building patched OVS into $prefix (log: $log)" >&2

tar xzf "$tarball" -C "$build" >> "$log" 2>&1 || fail "cannot extract $tarball"
src=$(find "$build" -mindepth 1 -maxdepth 1 -type d | head -n 1)
cd "$src"
for p in "${patches[@]}"; do
    echo "applying $(basename "$p")" >> "$log"
    patch -p1 --forward --batch < "$p" >> "$log" 2>&1 || fail "patch $(basename "$p") does not apply"
done

py3=python3
[ -x /usr/bin/python3 ] && py3=/usr/bin/python3
{
    PYTHON3=$py3 ./configure --prefix="$prefix" --localstatedir="$prefix/var" \
        --sysconfdir="$prefix/etc" --disable-ssl --disable-libcapng \
        --enable-silent-rules
} >> "$log" 2>&1 || fail "configure failed"
make -j"$(nproc)" >> "$log" 2>&1 || fail "make failed"
make install >> "$log" 2>&1 || fail "make install failed"
touch "$prefix/.complete"
cd /
rm -rf "$build"
echo "$prefix"
