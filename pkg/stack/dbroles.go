package stack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/platform"
)

// Each service connects as its own PostgreSQL role, which owns its schema and nothing else
// (see pkg/db/roles.go). The stack's DatabaseURL is the administrator's: with it, starting a
// service first makes sure its role exists with the password kept in the data directory
// (db/<service>.password, created on first start, readable by the owner only; the variable
// THEFOLD_<SERVICE>_DB_PASSWORD overrides it), then gives the service a URL naming that
// role. It runs at every start, so restarts by the supervisor repair a dropped role too.

// adminDatabaseURL is the URL roles are created with.
func (s *Stack) adminDatabaseURL() string {
	if s.DatabaseURL != "" {
		return s.DatabaseURL
	}
	return db.DefaultURL
}

// DBPasswordPath is where the data directory keeps svc's database password.
func (s *Stack) DBPasswordPath(svc string) string {
	return filepath.Join(s.DataDir, "db", svc+".password")
}

// dbPassword returns svc's role password: the environment's, else the data directory's,
// creating it on first use.
func (s *Stack) dbPassword(svc string) (string, error) {
	if pw := os.Getenv(passwordEnv(svc)); pw != "" {
		return pw, nil
	}
	path := s.DBPasswordPath(svc)
	if b, err := os.ReadFile(path); err == nil {
		if pw := strings.TrimSpace(string(b)); pw != "" {
			return pw, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	pw := db.NewPassword()
	if err := os.WriteFile(path, []byte(pw+"\n"), 0o600); err != nil {
		return "", err
	}
	return pw, nil
}

// passwordEnv is e.g. THEFOLD_TASKS_DB_PASSWORD.
func passwordEnv(svc string) string {
	return strings.TrimSuffix(platform.AddrEnv(svc), "_ADDR") + "_DB_PASSWORD"
}

// ServiceDatabaseURL makes sure svc's role exists and returns the URL svc connects with.
func (s *Stack) ServiceDatabaseURL(ctx context.Context, svc string) (string, error) {
	admin := s.adminDatabaseURL()
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("stack: the database URL must be a postgres:// URL")
	}
	role, err := db.RoleName(strings.TrimPrefix(u.Path, "/"), svc)
	if err != nil {
		return "", fmt.Errorf("stack: %w", err)
	}
	pw, err := s.dbPassword(svc)
	if err != nil {
		return "", fmt.Errorf("stack: database password for %s: %w", svc, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if svc == platform.ServiceNames[0] {
		// Once per start of the stack: roles of databases dropped since (the tests').
		_ = db.SweepServiceRoles(ctx, admin)
	}
	if err := db.EnsureServiceRole(ctx, admin, svc, role, pw); err != nil {
		return "", fmt.Errorf("stack: %w (the stack's database URL must name an administrator, e.g. the thefold role scripts/setup.sh creates)", err)
	}
	// memory stores embeddings with pgvector, which only an administrator can install.
	if svc == "memory" {
		if err := db.EnsureExtension(ctx, admin, "vector"); err != nil {
			return "", fmt.Errorf("stack: %w (memory needs pgvector on the server: scripts/setup.sh builds and installs it)", err)
		}
	}
	return db.ServiceURL(admin, role, pw)
}
