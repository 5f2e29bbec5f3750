#!/usr/bin/env bash
# make postgres-image: the PostgreSQL+pgvector image docker-compose.yml runs by default,
# thefold/postgres:15-pgvector, without pulling anything from a registry.
#
#   auto (default)  pgvector/pgvector:pg15 already on this machine: tagged as
#                   thefold/postgres:15-pgvector. Otherwise, the build machine has
#                   PostgreSQL 15 and pgvector installed (scripts/setup.sh installs both):
#                   built FROM scratch out of those Debian packages (deploy/postgres/).
#                   Otherwise pgvector/pgvector:pg15 is pulled and tagged.
#   THEFOLD_POSTGRES_FROM=debian     from this machine's packages, never the official image
#   THEFOLD_POSTGRES_FROM=official   always pull pgvector/pgvector:pg15 and tag it
#
# The built image holds copies of this machine's files: the postgresql-15 binaries and
# their shared libraries (found with ldd), /usr/share/postgresql/15 with the pgvector
# extension, bash and busybox-static (the entrypoint and the init scripts), the C.UTF-8
# locale and the time zone database. Its label org.thefold.postgres.inputs is a hash of all
# of that (names, sizes and times of the host's files; the content of the Dockerfile, the
# entrypoint and these scripts): when the image exists with the same hash the build is
# skipped (well under a second); a package upgrade rebuilds it (about 20 s).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=${THEFOLD_POSTGRES_LOCAL_IMAGE:-thefold/postgres:15-pgvector}
OFFICIAL=pgvector/pgvector:pg15
FROM=${THEFOLD_POSTGRES_FROM:-auto}
PG=15
PGBIN=/usr/lib/postgresql/$PG/bin
PGLIB=/usr/lib/postgresql/$PG/lib
PGSHARE=/usr/share/postgresql/$PG
BUSYBOX=${BUSYBOX:-/bin/busybox}
CTX=$ROOT/.thefold/postgres-image
LABEL=org.thefold.postgres.inputs

log() { echo "postgres-image: $*"; }
die() { echo "postgres-image: $*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "no docker command"
docker info >/dev/null 2>&1 || die "the docker engine does not answer (docker info)"

use_official() {
  docker tag "$OFFICIAL" "$IMAGE"
  log "$IMAGE is $OFFICIAL ($1)"
}

case $FROM in
auto | debian | official) ;;
*) die "THEFOLD_POSTGRES_FROM=$FROM: want auto, debian or official" ;;
esac

if [ "$FROM" = auto ] && docker image inspect "$OFFICIAL" >/dev/null 2>&1; then
  use_official "present on this machine"
  exit 0
fi

have_packages() {
  [ -x "$PGBIN/postgres" ] && [ -f "$PGSHARE/extension/vector.control" ] && [ -f "$PGLIB/vector.so" ] &&
    [ -x "$BUSYBOX" ] && command -v ldd >/dev/null 2>&1
}
if [ "$FROM" = official ] || { [ "$FROM" = auto ] && ! have_packages; }; then
  [ "$FROM" = official ] || log "this machine has no PostgreSQL $PG with pgvector and busybox (scripts/setup.sh installs them): pulling $OFFICIAL"
  docker pull -q "$OFFICIAL" >/dev/null || die "cannot pull $OFFICIAL either: run scripts/setup.sh (PostgreSQL $PG, pgvector, busybox-static) and make postgres-image again, or set THEFOLD_POSTGRES_IMAGE to a PostgreSQL $PG image with pgvector"
  use_official pulled
  exit 0
fi
have_packages || die "THEFOLD_POSTGRES_FROM=debian: missing $PGBIN/postgres, $PGSHARE/extension/vector.control, $PGLIB/vector.so or $BUSYBOX (scripts/setup.sh installs them)"

# --- skip the build when the image exists made of the same ---------------------------------
# The inputs: this script, copy-libs.sh, the Dockerfile and the entrypoint (their content),
# and the name, size and modification time of every file of the host the image copies or
# could copy (the PostgreSQL tree, the shells, the locale, the time zones, and the C
# library directories the shared libraries come from: any package upgrade there rebuilds).
libdirs=$(ldd "$PGBIN/postgres" | awk '$3 ~ /^\// {print $3}' | xargs -n1 dirname | xargs -n1 readlink -f | sort -u)
# shellcheck disable=SC2086 # libdirs is a list of directories
inputs=$({
  cd "$ROOT" && sha256sum scripts/postgres-image.sh scripts/copy-libs.sh deploy/postgres/Dockerfile deploy/postgres/docker-entrypoint.sh
  find -L "$PGBIN" "$PGLIB" "$PGSHARE" /usr/share/zoneinfo /usr/lib/locale/C.utf8 "$(command -v bash)" "$BUSYBOX" \
    "$(command -v locale || echo /nonexistent)" -printf '%p %s %T@\n' 2>/dev/null
  find -L $libdirs -maxdepth 1 -printf '%p %s %T@\n' 2>/dev/null
} | sha256sum | cut -c1-16)
have=$(docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$IMAGE" 2>/dev/null || true)
if [ "$have" = "$inputs" ]; then
  log "$IMAGE is up to date (inputs $inputs: this machine's PostgreSQL $PG and pgvector)"
  exit 0
fi

# --- stage the build context: rootfs/ (root's), owned/ (the postgres user's) ---------------
start=$(date +%s)
rm -rf "$CTX"
mkdir -p "$CTX/rootfs" "$CTX/owned/data" "$CTX/owned/run"
R=$CTX/rootfs

# copy FILE DEST: the file's content (symlinks followed) at DEST.
copy() {
  local src=$1 dest=$2
  [ -e "$R$dest" ] && return 0
  mkdir -p "$R$(dirname "$dest")"
  cp -L --preserve=mode "$src" "$R$dest"
}

elves=()
# The server and its client programs (psql, pg_isready for the health check, pg_dump, ...).
for f in "$PGBIN"/*; do
  if [ -L "$f" ]; then
    mkdir -p "$R$PGBIN" && ln -s "$(readlink "$f")" "$R$f"
  else
    copy "$f" "$f"
    elves+=("$f")
  fi
done
# Its loadable modules (PL/pgSQL, pgvector's vector.so, contrib, encoding conversions);
# not the LLVM JIT (without llvmjit.so the server runs without JIT), not SELinux's sepgsql,
# nor the build files (pgxs, static libraries, bitcode).
for f in "$PGLIB"/*.so; do
  case $(basename "$f") in llvmjit.so | sepgsql.so) continue ;; esac
  copy "$f" "$f"
  elves+=("$f")
done
# share: postgres.bki, the catalogs' SQL, time zone sets, text search data, extensions.
mkdir -p "$R$(dirname "$PGSHARE")"
cp -rL "$PGSHARE" "$R$PGSHARE"
# The shells: bash for the entrypoint and deploy/db-roles.sh, busybox for the commands a
# script or a person in `docker exec` expects (env, ls, cat, ...).
copy "$(command -v bash)" /usr/bin/bash
elves+=("$(command -v bash)")
copy "$BUSYBOX" /usr/bin/busybox
elves+=("$BUSYBOX")
# locale -a: initdb asks it which locales to import as collations (C.UTF-8 here).
if command -v locale >/dev/null 2>&1; then
  copy "$(command -v locale)" /usr/bin/locale
  elves+=("$(command -v locale)")
fi
ln -s bash "$R/usr/bin/sh"
for a in $("$BUSYBOX" --list); do
  [ -e "$R/usr/bin/$a" ] || [ -L "$R/usr/bin/$a" ] || ln -s busybox "$R/usr/bin/$a"
done
# The shared libraries all of these load, and the dynamic loader.
bash "$ROOT/scripts/copy-libs.sh" "$R" "${elves[@]}"
# The locale initdb uses (C.UTF-8) and the time zones the server uses (system tzdata).
if [ -d /usr/lib/locale/C.utf8 ]; then
  mkdir -p "$R/usr/lib/locale" && cp -rL /usr/lib/locale/C.utf8 "$R/usr/lib/locale/C.utf8"
fi
mkdir -p "$R/usr/share" && cp -rL /usr/share/zoneinfo "$R/usr/share/zoneinfo"
# Users, and the name service reading them (glibc's files backend is built in).
mkdir -p "$R/etc" "$R/tmp" "$R/var/lib/postgresql" "$R/var/run" "$R/usr/local/bin" "$R/docker-entrypoint-initdb.d"
printf 'root:x:0:0:root:/root:/bin/bash\npostgres:x:999:999:PostgreSQL administrator:/var/lib/postgresql:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$R/etc/passwd"
printf 'root:x:0:\npostgres:x:999:\nnogroup:x:65534:\n' >"$R/etc/group"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' >"$R/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$R/etc/hosts"
chmod 1777 "$R/tmp"
install -m 0755 "$ROOT/deploy/postgres/docker-entrypoint.sh" "$R/usr/local/bin/docker-entrypoint.sh"
cp "$ROOT/deploy/postgres/Dockerfile" "$CTX/Dockerfile"

# --- build ---------------------------------------------------------------------------------
old=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
out=$(docker build -q --label "$LABEL=$inputs" -t "$IMAGE" "$CTX" 2>&1) || { echo "$out" >&2; die "docker build failed"; }
# The image this one replaces, unless a container still uses it: not left dangling.
if [ -n "$old" ] && [ "$(docker image inspect -f '{{.Id}}' "$IMAGE")" != "$old" ]; then
  docker rmi "$old" >/dev/null 2>&1 || true
fi
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
log "$IMAGE built from this machine's Debian packages: $("$PGBIN/postgres" --version), pgvector $(sed -n "s/^default_version = '\(.*\)'/\1/p" "$PGSHARE/extension/vector.control"), $((size / 1048576)) MB, in $(($(date +%s) - start)) s"
