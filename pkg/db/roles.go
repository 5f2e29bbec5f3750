package db

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Service roles. Each service connects as its own PostgreSQL role, which owns the service's
// schema and has no rights on any other: a bug or an injection in one service cannot read
// or change another's data. The role is named "<database>_<schema>" ("thefold_tasks" in the
// default "thefold" database), because roles are cluster-wide while schemas live in one
// database: two stacks on one server (a developer's stack and the end-to-end tests) then
// never share a role or overwrite each other's passwords.
//
// An administrator creates the roles (scripts/setup.sh, `thefold up`, the compose file's
// init script; EnsureServiceRole here). Extensions (pgvector) are created by that
// administrator too, in the public schema, which every role may use but not create in.

// roleComment marks the roles EnsureServiceRole creates, so SweepServiceRoles can recognise
// those whose database is gone; the database's name follows it.
const roleComment = "thefold service role of database "

// RoleName is the role that owns schema in database: "<database>_<schema>".
func RoleName(database, schema string) (string, error) {
	if err := ValidateSchema(schema); err != nil {
		return "", err
	}
	name := database + "_" + schema
	if !schemaPattern.MatchString(name) || len(name) > 63 {
		return "", fmt.Errorf("db: role name %q for database %q: want a lower-case identifier of at most 63 bytes", name, database)
	}
	return name, nil
}

// NewPassword returns a random password (24 URL- and SQL-safe characters).
func NewPassword() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ServiceURL is adminURL (a postgres:// URL) with the user and password replaced: the
// same server, database and parameters, reached as role.
func ServiceURL(adminURL, role, password string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("db: service URL: the database URL must be a postgres:// URL")
	}
	u.User = url.UserPassword(role, password)
	q := u.Query()
	if q.Has("user") || q.Has("password") {
		q.Del("user")
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// EnsureServiceRole makes role (see RoleName) a login role with password that owns schema
// in the database of adminURL and has no other rights there beyond what every role has
// (connecting, using the public schema's extensions). It is idempotent and repairs what an
// earlier version left behind: a schema and objects created by the administrator are given
// to the role, so the role can keep migrating them. adminURL's user must be a superuser (or
// hold CREATEROLE and own the database and the schema's objects).
func EnsureServiceRole(ctx context.Context, adminURL, schema, role, password string) error {
	if err := ValidateSchema(schema); err != nil {
		return fmt.Errorf("db: service role: %w", err)
	}
	if !schemaPattern.MatchString(role) || len(role) > 63 {
		return fmt.Errorf("db: service role: invalid role name %q", role)
	}
	if password == "" {
		return fmt.Errorf("db: service role %s: empty password", role)
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("db: service role %s: connect as administrator: %w", role, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	database := conn.Config().Database

	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("db: service role %s: %w", role, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	// Concurrent starts for the same database (two `thefold up`) would race on CREATE ROLE,
	// and the services of one start on GRANT … ON DATABASE, which rewrites the database's
	// one ACL ("tuple concurrently updated"): one lock per database serialises both.
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", roleLockKey("database:"+database)); err != nil {
		return fmt.Errorf("db: service role %s: lock: %w", role, err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", role).Scan(&exists); err != nil {
		return fmt.Errorf("db: service role %s: %w", role, err)
	}
	r, s, d := ident(role), ident(schema), ident(database)
	stmts := []string{}
	if !exists {
		stmts = append(stmts, "CREATE ROLE "+r)
	}
	stmts = append(stmts,
		// Utility statements take no bind parameters: the password is a quoted literal.
		"ALTER ROLE "+r+" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD "+literal(password),
		"COMMENT ON ROLE "+r+" IS "+literal(roleComment+database),
		"GRANT CONNECT, TEMPORARY ON DATABASE "+d+" TO "+r,
		"GRANT USAGE ON SCHEMA public TO "+r,
		"CREATE SCHEMA IF NOT EXISTS "+s+" AUTHORIZATION "+r,
		"ALTER SCHEMA "+s+" OWNER TO "+r,
		"REVOKE ALL ON SCHEMA "+s+" FROM PUBLIC",
		reownObjects(schema, role),
	)
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("db: service role %s for schema %s: %s: %w", role, schema, firstWords(q), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("db: service role %s: commit: %w", role, err)
	}
	return nil
}

// reownObjects gives role every table, view, sequence, function and type in schema that
// another role owns (tables first: their serial sequences follow them).
func reownObjects(schema, role string) string {
	return fmt.Sprintf(`DO $do$
DECLARE
	nsp oid := %[1]s::regnamespace;
	own oid := %[2]s::regrole;
	o record;
BEGIN
	FOR o IN SELECT c.oid::regclass AS name FROM pg_class c
		WHERE c.relnamespace = nsp AND c.relowner <> own AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
	LOOP
		EXECUTE format('ALTER TABLE %%s OWNER TO %%I', o.name, %[3]s);
	END LOOP;
	FOR o IN SELECT c.oid::regclass AS name FROM pg_class c
		WHERE c.relnamespace = nsp AND c.relowner <> own AND c.relkind = 'S'
	LOOP
		EXECUTE format('ALTER SEQUENCE %%s OWNER TO %%I', o.name, %[3]s);
	END LOOP;
	FOR o IN SELECT p.oid::regprocedure AS name FROM pg_proc p
		WHERE p.pronamespace = nsp AND p.proowner <> own
	LOOP
		EXECUTE format('ALTER ROUTINE %%s OWNER TO %%I', o.name, %[3]s);
	END LOOP;
	FOR o IN SELECT t.oid::regtype AS name FROM pg_type t
		WHERE t.typnamespace = nsp AND t.typowner <> own AND t.typtype IN ('e', 'd', 'r', 'm')
	LOOP
		EXECUTE format('ALTER TYPE %%s OWNER TO %%I', o.name, %[3]s);
	END LOOP;
END
$do$`, literal(ident(schema)), literal(ident(role)), literal(role))
}

// SweepServiceRoles drops the service roles of databases that no longer exist (the tests'
// throw-away databases). Best effort: a role that still owns something elsewhere stays.
func SweepServiceRoles(ctx context.Context, adminURL string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("db: sweep service roles: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT r.rolname FROM pg_roles r
		JOIN pg_shdescription c ON c.objoid = r.oid AND c.classoid = 'pg_authid'::regclass
		WHERE starts_with(c.description, $1)
		  AND NOT EXISTS (SELECT 1 FROM pg_database d WHERE $1 || d.datname = c.description)`, roleComment)
	if err != nil {
		return fmt.Errorf("db: sweep service roles: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("db: sweep service roles: %w", err)
	}
	for _, n := range names {
		_, _ = conn.Exec(ctx, "DROP ROLE IF EXISTS "+ident(n))
	}
	return nil
}

// DropServiceRole drops role after dropping what it owns in the database of adminURL. Tests
// use it; its sessions must be closed first.
func DropServiceRole(ctx context.Context, adminURL, role string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("db: drop role %s: %w", role, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, q := range []string{"DROP OWNED BY " + ident(role) + " CASCADE", "DROP ROLE " + ident(role)} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("db: drop role %s: %w", role, err)
		}
	}
	return nil
}

func roleLockKey(role string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("thefold/db.EnsureServiceRole/" + role))
	return int64(h.Sum64())
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// literal quotes s as an SQL string literal: standard_conforming_strings is on (the
// default since PostgreSQL 9.1), so doubling the single quotes is all the escaping needed.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func firstWords(q string) string {
	f := strings.Fields(q)
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

// EnsureExtension creates an extension (pgvector's "vector") in the public schema of the
// administrator's database unless it is there; the services' roles may use it but not
// create it.
func EnsureExtension(ctx context.Context, adminURL, name string) error {
	if !schemaPattern.MatchString(name) {
		return fmt.Errorf("db: extension: invalid name %q", name)
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("db: extension %s: connect as administrator: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", roleLockKey("extension:"+name)); err != nil {
		return fmt.Errorf("db: extension %s: lock: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+ident(name)+" SCHEMA public"); err != nil {
		return fmt.Errorf("db: extension %s: %w", name, err)
	}
	return nil
}
