package glob

import "testing"

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"**/*.sql", "migrations/0001_users.sql", true},
		{"**/*.sql", "schema.sql", true},
		{"**/*.sql", "a/b/c/d.sql", true},
		{"**/*.sql", "schema.sql.go", false},
		{"migrations/**", "migrations/0001.sql", true},
		{"migrations/**", "migrations/a/b.sql", true},
		{"migrations/**", "db/migrations/a.sql", false},
		{".git/**", ".git/config", true},
		{".git/**", "src/.git/config", false},
		{"**/.env", ".env", true},
		{"**/.env", "deploy/.env", true},
		{"**/.env", "deploy/.env.example", false},
		{"**/.env.*", "deploy/.env.local", true},
		{"*.go", "main.go", true},
		{"*.go", "cmd/main.go", false},
		{"cmd/*/main.go", "cmd/api/main.go", true},
		{"**/id_rsa*", "home/.ssh/id_rsa.pub", true},
		{"**", "anything/at/all", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"./main.go", "main.go", false},
		{"main.go", "./main.go", true},
	} {
		if got := Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"**/*.sql", "migrations/**", ".git/**", "*.[ch]", "a/**/b"} {
		if err := Validate(ok); err != nil {
			t.Errorf("Validate(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/etc/passwd", "a**/b", "[a-", "x/**.go"} {
		if err := Validate(bad); err == nil {
			t.Errorf("Validate(%q) accepted a malformed glob", bad)
		}
	}
}
