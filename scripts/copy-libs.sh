#!/usr/bin/env bash
# copy-libs.sh ROOTFS ELF...: copies into ROOTFS the shared libraries the ELF files load (as
# ldd finds them on this machine, the dynamic loader included), for images built FROM
# scratch out of this machine's files (make images, scripts/postgres-image.sh). A library
# lands at its path with the directory resolved through symlinks (/lib/x86_64-linux-gnu/
# libc.so.6 -> ROOTFS/usr/lib/x86_64-linux-gnu/libc.so.6), and the host's /bin, /lib, /lib64
# and /sbin symlinks into /usr (a merged-/usr system, Debian since bookworm) are made in
# ROOTFS too, so the paths ldd printed resolve there as here. Static executables need
# nothing: for them this copies nothing.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 ROOTFS ELF..." >&2; exit 2; }
R=$1
shift
[ $# -gt 0 ] || exit 0

libs=$({ ldd "$@" 2>/dev/null || true; } | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\// && $i !~ /:$/) print $i}' | sort -u)
[ -n "$libs" ] || exit 0
mkdir -p "$R"
for d in bin lib lib64 sbin; do
  if [ -L "/$d" ] && ! [ -e "$R/$d" ] && ! [ -L "$R/$d" ]; then ln -s "$(readlink "/$d")" "$R/$d"; fi
done
while read -r lib; do
  dest="$(cd "$(dirname "$lib")" && pwd -P)/$(basename "$lib")"
  [ -e "$R$dest" ] && continue
  mkdir -p "$R$(dirname "$dest")"
  cp -L --preserve=mode "$lib" "$R$dest"
done <<<"$libs"
