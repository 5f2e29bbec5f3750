package config

import (
	"strings"
	"testing"
)

func TestMaskSecretsEveryConnectionStringForm(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"url userinfo", "postgres://thefold:hunter2@db:5432/thefold?sslmode=disable",
			"postgres://thefold:***@db:5432/thefold?sslmode=disable"},
		{"url userinfo with @ in the password", "postgres://u:p@ss@db/x", "postgres://u:***@db/x"},
		{"url userinfo with / in the password", "postgres://u:pa/ss@db/x", "postgres://u:***@db/x"},
		{"url query password", "postgres://db:5432/thefold?user=u&password=hunter2&sslmode=disable",
			"postgres://db:5432/thefold?user=u&password=***&sslmode=disable"},
		{"url query password first", "postgresql:///thefold?password=hunter2", "postgresql:///thefold?password=***"},
		{"url query sslpassword", "postgres://u@db/x?sslkey=/k.pem&sslpassword=hunter2#frag",
			"postgres://u@db/x?sslkey=/k.pem&sslpassword=***#frag"},
		{"url query case-insensitive", "postgres://db/x?PASSWORD=hunter2", "postgres://db/x?PASSWORD=***"},
		{"url both forms", "postgres://u:hunter2@db/x?password=hunter2", "postgres://u:***@db/x?password=***"},
		{"key=value", "password=hunter2 host=db user=u", "password=*** host=db user=u"},
		{"key=value middle", "host=db password=hunter2 dbname=x", "host=db password=*** dbname=x"},
		{"key=value spaces around =", "host=db password = hunter2 dbname=x", "host=db password = *** dbname=x"},
		{"key=value quoted", `host=db password='hun ter\'2' dbname=x`, "host=db password=*** dbname=x"},
		{"key=value unterminated quote", `host=db password='hun ter2`, "host=db password=***"},
		{"key=value sslpassword", "host=db sslpassword=hunter2", "host=db sslpassword=***"},
		{"no secret", "postgres://u@db/x?sslmode=disable", "postgres://u@db/x?sslmode=disable"},
		{"not a password key", "host=db passfile=/p application_name=my_password_app", "host=db passfile=/p application_name=my_password_app"},
		{"plain value", "info", "info"},
		{"other url", "http://127.0.0.1:4318", "http://127.0.0.1:4318"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := MaskSecrets(tc.in)
			if got != tc.want {
				t.Errorf("MaskSecrets(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if strings.Contains(got, "hunter2") || strings.Contains(got, "ter2") {
				t.Errorf("secret left in %q", got)
			}
		})
	}
}

// TestRedactedMasksEveryForm checks the start-up log path (Redacted) uses the same rules.
func TestRedactedMasksEveryForm(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://db/thefold?password=hunter2",
		"host=db user=thefold password=hunter2",
		"host=db sslpassword=hunter2",
	} {
		r := Redacted(&testConfig{DBURL: dsn})
		if strings.Contains(r["THEFOLD_TEST_DB"], "hunter2") || !strings.Contains(r["THEFOLD_TEST_DB"], "***") {
			t.Errorf("Redacted shows %q for %q", r["THEFOLD_TEST_DB"], dsn)
		}
	}
}
