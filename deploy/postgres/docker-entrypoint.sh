#!/usr/bin/env bash
# The entrypoint of thefold/postgres:15-pgvector (deploy/postgres/Dockerfile): what
# docker-compose.yml needs of the official image's, and no more. On the first start of an
# empty data directory it runs initdb (superuser POSTGRES_USER with POSTGRES_PASSWORD,
# UTF-8, C.UTF-8 locale, scram-sha-256 over TCP), creates POSTGRES_DB, runs
# /docker-entrypoint-initdb.d/*.sh and *.sql against it with a server listening on no TCP
# port and on a socket in /tmp (so pg_isready, the health check, and the services see no
# server until the initialisation is done), stops that server and execs the real one.
# Runs as the postgres user (uid 999), never as root.
set -Eeuo pipefail

log() { echo "postgres-entrypoint: $*" >&2; }

# `docker run image -c x=y`: options for postgres.
if [ "${1:0:1}" = '-' ]; then
  set -- postgres "$@"
fi

if [ "$1" = postgres ] || [ "$1" = postmaster ]; then
  if [ "$EUID" -eq 0 ]; then
    log "runs as postgres (uid 999), not as root: remove the user: override"
    exit 1
  fi
  : "${PGDATA:=/var/lib/postgresql/data}"
  export PGDATA
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
    export POSTGRES_USER POSTGRES_DB
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
      log "the data directory is empty and POSTGRES_PASSWORD is not set: set it (the superuser's password)"
      exit 1
    fi
    if ! [ -w "$PGDATA" ]; then
      log "$PGDATA is not writable by uid $EUID (a volume made by another image? its owner must be 999)"
      exit 1
    fi
    log "initialising $PGDATA (superuser $POSTGRES_USER, database $POSTGRES_DB)"
    # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of arguments
    initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") \
      --encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 \
      ${POSTGRES_INITDB_ARGS:-} >/dev/null
    {
      echo
      echo "# thefold/postgres: every address, with a password (docker-entrypoint.sh)"
      echo "host all all all scram-sha-256"
    } >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"

    # The initialisation's own server: no TCP, its socket in /tmp.
    export PGHOST=/tmp PGPORT=5432 PGUSER="$POSTGRES_USER"
    pg_ctl -D "$PGDATA" -w -s -o "-c listen_addresses='' -c unix_socket_directories=/tmp" start
    if [ "$POSTGRES_DB" != postgres ]; then
      psql -v ON_ERROR_STOP=1 -q --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
    fi
    for f in /docker-entrypoint-initdb.d/*; do
      [ -e "$f" ] || continue
      case "$f" in
      *.sh)
        log "running $f"
        if [ -x "$f" ]; then "$f"; else
          # shellcheck disable=SC1090
          . "$f"
        fi
        ;;
      *.sql)
        log "running $f"
        psql -v ON_ERROR_STOP=1 -q --dbname "$POSTGRES_DB" -f "$f"
        ;;
      *) log "ignoring $f" ;;
      esac
    done
    pg_ctl -D "$PGDATA" -w -s -m fast stop
    unset PGHOST PGPORT PGUSER
    log "initialised; starting PostgreSQL"
  fi
fi

exec "$@"
