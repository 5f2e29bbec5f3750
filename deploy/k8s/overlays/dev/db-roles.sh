#!/usr/bin/env bash
# One PostgreSQL role per service, owning the service's schema and nothing else (the SQL
# twin of pkg/db.EnsureServiceRole, which `thefold up` runs; keep the two alike).
#
#   deploy/db-roles.sh <database> <service>...   prints the SQL (scripts/setup.sh pipes it to psql)
#   run by the postgres image's entrypoint       applies it to $POSTGRES_DB (docker-compose.yml
#                                                mounts it into /docker-entrypoint-initdb.d)
#
# The role of service S in database D is "D_S" (thefold_tasks). Its password comes from
# THEFOLD_<S>_DB_PASSWORD (required). Idempotent: run it again to change passwords.
# Objects an administrator created in a schema before roles existed are handed over by
# `thefold up` (pkg/db.EnsureServiceRole), not here.
set -euo pipefail

SERVICES=(tasks memory skills ai sandbox github builder agent gateway)

# quote a value as an SQL literal
lit() { printf "'%s'" "${1//\'/\'\'}"; }

sql() {
  local db=$1; shift
  [[ $db =~ ^[a-z][a-z0-9_]*$ ]] || { echo "db-roles: bad database name '$db'" >&2; exit 1; }
  for svc in "$@"; do
    [[ $svc =~ ^[a-z][a-z0-9_]*$ ]] || { echo "db-roles: bad service name '$svc'" >&2; exit 1; }
    local role="${db}_${svc}" var="THEFOLD_${svc^^}_DB_PASSWORD"
    local pw=${!var:-}
    [ -n "$pw" ] || { echo "db-roles: $var is not set" >&2; exit 1; }
    cat <<SQL
DO \$\$BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$role') THEN CREATE ROLE "$role"; END IF;
END\$\$;
ALTER ROLE "$role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD $(lit "$pw");
COMMENT ON ROLE "$role" IS 'thefold service role of database $db';
GRANT CONNECT, TEMPORARY ON DATABASE "$db" TO "$role";
GRANT USAGE ON SCHEMA public TO "$role";
CREATE SCHEMA IF NOT EXISTS "$svc" AUTHORIZATION "$role";
ALTER SCHEMA "$svc" OWNER TO "$role";
REVOKE ALL ON SCHEMA "$svc" FROM PUBLIC;
SQL
  done
}

if [ $# -eq 0 ] && [ -n "${POSTGRES_DB:-}" ]; then
  # The postgres image's first start: pgvector for every database's public schema, then the roles.
  { echo 'CREATE EXTENSION IF NOT EXISTS vector;'; sql "$POSTGRES_DB" "${SERVICES[@]}"; } |
    psql -v ON_ERROR_STOP=1 -q --username "${POSTGRES_USER:-postgres}" --dbname "$POSTGRES_DB"
elif [ $# -ge 2 ]; then
  sql "$@"
else
  echo "usage: $0 <database> <service>..." >&2; exit 2
fi
