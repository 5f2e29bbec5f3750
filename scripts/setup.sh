#!/usr/bin/env bash
# Idempotently installs what TheFold needs on a Debian bookworm machine (run as root):
# protobuf tooling (go install, cached in GOPATH/bin), PostgreSQL 15 with pgvector (built from
# Debian's trixie source package when no binary package exists), bubblewrap, git, and the
# docker sandbox image's makings (busybox-static, python3 with pip and pytest, nodejs,
# node-typescript, gcc and libc6-dev; busybox-static also goes into the compose stack's
# PostgreSQL image, scripts/postgres-image.sh), docker-compose where a docker engine runs
# without it; then
# starts PostgreSQL and creates the thefold role and database, and one role per service
# owning that service's schema. Safe to run again and again.
#
# CI=true or THEFOLD_TEST_FAST_PG=1: the cluster is for throw-away test data, so fsync,
# synchronous_commit and full_page_writes are turned off (a crash of the machine can then
# corrupt it; a reload, no restart). Without either, setup turns them back on: a
# developer's cluster, which `make run` uses too, never stays non-durable by accident.
set -euo pipefail

log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*"; }

PG_VERSION=15
DB_USER=${THEFOLD_DB_USER:-thefold}
DB_PASS=${THEFOLD_DB_PASSWORD:-thefold}
DB_NAME=${THEFOLD_DB_NAME:-thefold}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA_DIR=${THEFOLD_DATA_DIR:-$ROOT/.thefold}
SERVICES=(tasks memory skills ai sandbox github builder agent gateway)
GOBIN=$(go env GOPATH)/bin
export PATH="$GOBIN:$PATH"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_updated=
apt_install() {
  local missing=()
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# --- system packages (first: go install needs ca-certificates) ----------------------------
# gcc: the race detector (make test uses -race) needs cgo. curl: the e2e tests follow
# server-sent events with `curl -N`, as the README does. chromium: the e2e test of a real
# EventSource (tests/e2e/eventsource_test.go, driven with chromedp) runs it headless.
apt_install ca-certificates curl git make gcc libc6-dev bubblewrap busybox-static python3 python3-pip python3-pytest nodejs node-typescript postgresql-$PG_VERSION postgresql-contrib chromium

# docker-compose: the compose stack's test (make compose-test, run by make test-e2e) drives
# it. Only where an engine answers, and only when neither it nor the compose plugin is there.
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 &&
  ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
  apt_install docker-compose
fi

# --- protobuf tooling -------------------------------------------------------------------------
# Versions are pinned: generated code records the plugin versions, and the freshness check
# compares byte for byte. A binary of another version is reinstalled.
install_go_tool() { # name package@version
  local want=${2##*@}
  if [ -x "$GOBIN/$1" ] && go version -m "$GOBIN/$1" 2>/dev/null | awk '$1=="mod"{print $3}' | grep -qx "$want"; then return 0; fi
  log "go install $2"; (cd / && GOFLAGS= go install "$2")
}
install_go_tool buf github.com/bufbuild/buf/cmd/buf@v1.75.0
install_go_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
install_go_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
install_go_tool protoc-gen-grpc-gateway github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@v2.32.0
install_go_tool protoc-gen-openapiv2 github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@v2.32.0

# govulncheck goes where every sandbox finds it: /usr/local/bin is bound into bwrap sandboxes
# (with /usr) and copied into the docker sandbox image (DefaultPrograms). The repository
# monitor's vulnerability audit runs it (with THEFOLD_SANDBOX_GOVULNDB); bookworm's package
# is a 2023 snapshot that reads neither today's database nor today's Go. Static: the image
# needs no library for it.
GOVULNCHECK=golang.org/x/vuln/cmd/govulncheck@v1.9.0
if ! go version -m /usr/local/bin/govulncheck 2>/dev/null | awk '$1=="mod"{print $3}' | grep -qx "${GOVULNCHECK##*@}"; then
  log "go install $GOVULNCHECK (into /usr/local/bin)"
  (cd / && GOFLAGS= CGO_ENABLED=0 GOBIN=/usr/local/bin go install "$GOVULNCHECK")
fi

# --- pgvector ---------------------------------------------------------------------------------
if [ ! -f /usr/share/postgresql/$PG_VERSION/extension/vector.control ]; then
  if apt-cache show postgresql-$PG_VERSION-pgvector >/dev/null 2>&1; then
    apt_install postgresql-$PG_VERSION-pgvector
  else
    log "building pgvector from Debian's source package"
    apt_install build-essential postgresql-server-dev-$PG_VERSION dpkg-dev
    if ! grep -rqs 'trixie' /etc/apt/sources.list.d/thefold-src.list; then
      echo 'deb-src http://deb.debian.org/debian trixie main' | as_root tee /etc/apt/sources.list.d/thefold-src.list >/dev/null
    fi
    as_root apt-get update -qq
    work=$(mktemp -d)
    (cd "$work" && apt-get source -qq pgvector >/dev/null 2>&1 && cd pgvector-*/ &&
      make -s PG_CONFIG=/usr/lib/postgresql/$PG_VERSION/bin/pg_config >/dev/null &&
      as_root make -s install PG_CONFIG=/usr/lib/postgresql/$PG_VERSION/bin/pg_config >/dev/null)
    rm -rf "$work"
  fi
fi

# --- PostgreSQL server ------------------------------------------------------------------------
if ! pg_lsclusters -h 2>/dev/null | awk '{print $1}' | grep -qx "$PG_VERSION"; then
  log "creating PostgreSQL $PG_VERSION cluster"
  as_root pg_createcluster $PG_VERSION main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v=$PG_VERSION '$1==v && $2=="main" {print $4}' | grep -qx online; then
  log "starting PostgreSQL $PG_VERSION"
  as_root pg_ctlcluster $PG_VERSION main start
fi
for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
pg_isready -q -h 127.0.0.1 -p 5432 || { echo "PostgreSQL did not come up" >&2; exit 1; }

psql_admin() { (cd / && as_root su postgres -c "PGOPTIONS=--client-min-messages=warning psql -v ON_ERROR_STOP=1 -qtA $*"); }

# A server that was already running when apt upgraded the package (installing
# postgresql-server-dev pulls the newest minor release) still runs the old binary, which then
# fails to load the new one's libraries ("undefined symbol" from plpgsql.so): restart it.
installed=$(/usr/lib/postgresql/$PG_VERSION/bin/postgres --version | awk '{print $3}')
running=$(psql_admin "-c 'SHOW server_version'" | awk '{print $1}')
if [ "$installed" != "$running" ]; then
  log "PostgreSQL $running is running but $installed is installed: restarting"
  as_root pg_ctlcluster $PG_VERSION main restart
  for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
fi
if [ "$(psql_admin "-c \"SELECT 1 FROM pg_roles WHERE rolname='$DB_USER'\"")" != "1" ]; then
  log "creating role $DB_USER"
  # Superuser: the role creates per-test databases and the vector extension.
  psql_admin "-c \"CREATE ROLE $DB_USER LOGIN SUPERUSER PASSWORD '$DB_PASS'\""
fi
if [ "$(psql_admin "-c \"SELECT 1 FROM pg_database WHERE datname='$DB_NAME'\"")" != "1" ]; then
  log "creating database $DB_NAME"
  psql_admin "-c \"CREATE DATABASE $DB_NAME OWNER $DB_USER\""
fi
psql_admin "-d $DB_NAME -c \"CREATE EXTENSION IF NOT EXISTS vector\""

# --- one role per service ---------------------------------------------------------------------
# Role <db>_<service> owns schema <service> and nothing else; its password is kept in the
# data directory (db/<service>.password), where `thefold up` reads it (THEFOLD_<SVC>_DB_PASSWORD
# overrides both). `thefold up` also creates missing roles and hands over objects created
# before roles existed (pkg/db.EnsureServiceRole); deploy/db-roles.sh is the SQL.
mkdir -p "$DATA_DIR/db" && chmod 700 "$DATA_DIR/db"
for svc in "${SERVICES[@]}"; do
  var="THEFOLD_${svc^^}_DB_PASSWORD" file="$DATA_DIR/db/$svc.password"
  if [ -z "${!var:-}" ]; then
    if [ ! -s "$file" ]; then
      (umask 077 && head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$file")
    fi
    export "$var=$(tr -d '[:space:]' <"$file")"
  fi
done
bash "$ROOT/deploy/db-roles.sh" "$DB_NAME" "${SERVICES[@]}" |
  (cd / && as_root su postgres -c "PGOPTIONS=--client-min-messages=warning psql -v ON_ERROR_STOP=1 -qtA -d $DB_NAME" >/dev/null)

# --- durability of the test cluster -----------------------------------------------------------
fast_settings=(fsync synchronous_commit full_page_writes)
if [ "${CI:-}" = "true" ] || [ "${THEFOLD_TEST_FAST_PG:-}" = "1" ]; then
  if [ "$(psql_admin "-c \"SHOW fsync\"")" != "off" ]; then
    log "test cluster: fsync, synchronous_commit, full_page_writes off (CI=true or THEFOLD_TEST_FAST_PG=1; not crash-safe)"
    for k in "${fast_settings[@]}"; do psql_admin "-c \"ALTER SYSTEM SET $k = off\""; done
    psql_admin "-c \"SELECT pg_reload_conf()\"" >/dev/null
  fi
elif [ -n "$(psql_admin "-c \"SELECT name FROM pg_file_settings WHERE name IN ('fsync','synchronous_commit','full_page_writes') AND sourcefile LIKE '%postgresql.auto.conf' LIMIT 1\"")" ]; then
  log "restoring durability (fsync, synchronous_commit, full_page_writes back to their defaults)"
  for k in "${fast_settings[@]}"; do psql_admin "-c \"ALTER SYSTEM RESET $k\""; done
  psql_admin "-c \"SELECT pg_reload_conf()\"" >/dev/null
fi

# --- memory -----------------------------------------------------------------------------------
# PostgreSQL's default shared_buffers (128MB) holds neither the memory service's HNSW index
# nor its table at 100k memories (490MB together): searches then copy pages in from the OS
# cache (p50 7.5 ms instead of 5.7 in the memory benchmark). A quarter of RAM, between 128MB
# and 2GB, is the usual setting; it takes a restart, done only when the value changes.
#
# Connections: the end-to-end suite runs three shards at once, each with its mesh of nine
# services (each with its connection pools, 35–45 connections a mesh), beside the replicas
# test's own stack of 13 processes and the CLI tests' stacks (about 33 each); the default 100
# is used up at once, and 300 was at the peak ("remaining connection slots are reserved":
# a CI run's replica agent could not start). 600 leaves room for a developer's tests beside
# the suite; it too takes a restart.
want_mb=$(awk '/^MemTotal/ {m = int($2 / 1024 / 4); if (m < 128) m = 128; if (m > 2048) m = 2048; print m}' /proc/meminfo)
want_conns=600
if [ "$(psql_admin "-c \"SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'\"")" != "$want_mb" ] ||
  [ "$(psql_admin "-c \"SELECT setting FROM pg_settings WHERE name = 'max_connections'\"")" -lt "$want_conns" ]; then
  log "shared_buffers = ${want_mb}MB (a quarter of RAM, at most 2GB), max_connections = $want_conns: restarting PostgreSQL"
  psql_admin "-c \"ALTER SYSTEM SET shared_buffers = '${want_mb}MB'\""
  psql_admin "-c \"ALTER SYSTEM SET max_connections = $want_conns\""
  as_root pg_ctlcluster $PG_VERSION main restart
  for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
  pg_isready -q -h 127.0.0.1 -p 5432 || { echo "PostgreSQL did not come back up" >&2; exit 1; }
fi

# --- the docker sandbox image -------------------------------------------------------------------
# The sandbox service builds its image when it starts and finds none (or an outdated one), and
# waits for it before it reports ready. On a new machine that is 1.5 minutes of compiling the
# standard library into the image's build cache — inside a test's wait for the stack, beside
# whatever else runs, and once per stack that starts before the first one finishes. Built
# here instead, once, before anything waits; when it is current this is a quick check.
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  start=$(date +%s)
  ( cd "$ROOT/services/sandbox" && go run . build-image >/dev/null ) || { echo "building the sandbox image failed" >&2; exit 1; }
  log "sandbox image ready ($(($(date +%s) - start)) s)"
else
  log "no docker engine: the docker sandbox image is not built (the bwrap backend needs none)"
fi

# --- the bwrap sandboxes' shared Go build cache --------------------------------------------------
# Likewise for bwrap: every bwrap sandbox mounts one read-only build cache of the standard
# library (built, vetted and tested once per toolchain), which the first bwrap backend of a
# machine makes. Made by whichever test or service got there first, it was 1.5 minutes of
# compiling beside the test run's own, made again whenever the process making it ended
# first (a test binary done with its tests), while every bwrap sandbox waited. Made here
# once instead; when it is there, this is a quick check. Where bubblewrap cannot make a
# sandbox (no user namespaces), nothing is made and the bwrap backend is not offered anyway.
start=$(date +%s)
warm_log=$(mktemp)
if dir=$(cd "$ROOT/services/sandbox" && go run . warm-cache 2>"$warm_log"); then
  log "bwrap sandboxes' shared Go build cache ready: $dir ($(($(date +%s) - start)) s)"
else
  log "no shared Go build cache for bwrap sandboxes (bwrap sandboxes build the standard library themselves): $(tail -n 1 "$warm_log")"
fi
rm -f "$warm_log"

log "ready: postgres://$DB_USER:***@127.0.0.1:5432/$DB_NAME"
