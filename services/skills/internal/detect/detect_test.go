package detect

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/testenv"
)

// fakes are credential-shaped values for the tests. Each is assembled from two pieces so
// that this file holds no contiguous secret for a scanner (this package included) to
// report. Test sources refer to them as @NAME@; @BT@ stands for a backquote, which a Go
// raw string cannot hold.
var fakes = map[string]string{
	"AWS_ID":      "AKIA" + "NUX5BOYA8E3YB2K9",
	"AWS_SECRET":  "8EoKLBoO//X5Ox1BtCeO" + "/bS/W3yFb6CN3fnnR3ra",
	"GH":          "ghp_" + "2XqN6xekf1S4x6tOApWCokgsRZWoOyfSMLHh",
	"GH_PAT":      "github_pat_" + "UNIyZgKOJNLqXgXAUmMtMRPptQInVuUUDJHcO7fSka_NtbFlhz6sRtkaiqadrJCD3q0EjTgCz4rl01s1WA",
	"SLACK":       "xoxb-" + "104353475393-2931725761853-zmJKemJjLSpQdF4ajV8Xblq2",
	"SLACK_HOOK":  "https://hooks.slack.com/services/" + "TUSYAWLB6LB/BJXQ2DDKPL3/PdNv5zWaeoEpsQXD61cOEtxp",
	"STRIPE":      "sk_live_" + "65M5xRCzWE4cqn07pa7Odmdg93kh13AB",
	"GOOGLE":      "AIza" + "hFa9ImteyS6qJ7EHzCmlj92FHUKYurqrIuc",
	"ANTHROPIC":   "sk-ant-api03-" + "WpIZGHeweOBOa6ciq9j2lI5WBmb4syTPVBJmqLAf4CiGIVUmqHIzcXRUIUFNio7jmXzokjbLdPhO9tyDh2UEA01Z1qZy7",
	"OPENAI":      "sk-" + "CfQL4u4iSzcrTO7xEMB5gIPMRR6YbzJDoBRK8HYfQpKHLhmG",
	"OPENAI_PROJ": "sk-proj-" + "aBW_dmHYHeG5uUpnIrRXMhj3EbcF1wMYUk4vsIMTrHRANjpye_Qb5UynjlaYm9zB",
	"JWT":         "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
	"PEM_BEGIN":   "-----BEGIN RSA " + "PRIVATE KEY-----",
	"PEM_END":     "-----END RSA " + "PRIVATE KEY-----",
	"PEM_BODY": "UvImZaYMEtKJGF2VDuiBNgkWb2sRPReNbA/TkB/yOaGglfIPk5VlDPk4C47bIkpr\n" +
		"JIoekk6P0K4uGpSSozBfGIy2EJAPnjR/rohtxlB3lex0XEw/yy6yxz4Uk0yGfuBX\n" +
		"unJJm/oSHoNrKsFXJu59awr2qxPDjpLK4NFQV7FZmH+UzHQR1xfxRXmyqhAPu7NP",
	"ENTROPY32": "rEHAGnPSkhMZid63" + "BjqSmI4lfNd6F3gP",
	"ENTROPY40": "5uFXdAyGArP1Ek5KLipD" + "PbRcWDZIOv5KE0PaVg2V",
	"HEX64":     "4197e955e6f6b817565e8ed355627903" + "f9077f0830f58517d933d1932c94ba9b",
	"BT":        "`",
}

// expand replaces @NAME@ markers with fakes.
func expand(s string) string {
	args := make([]string, 0, 2*len(fakes))
	for k, v := range fakes {
		args = append(args, "@"+k+"@", v)
	}
	return strings.NewReplacer(args...).Replace(s)
}

// want is an expected finding: its rule, its line, and the text its column points at
// (the first occurrence of at on that line, after expansion).
type want struct {
	rule string
	line int
	at   string
}

// tcase is one file and the findings one detector must report on it.
type tcase struct {
	name string
	path string
	src  string
	want []want
}

// runTable runs detector over each case and compares rule, line and column exactly.
func runTable(t *testing.T, detector string, cases []tcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := expand(tc.src)
			got, err := Run(detector, File{Path: tc.path, Content: src})
			if err != nil {
				t.Fatalf("Run(%q, %s): %v", detector, tc.path, err)
			}
			lines := strings.Split(src, "\n")
			type key struct {
				rule      string
				line, col int
			}
			var wantKeys, gotKeys []key
			for _, w := range tc.want {
				if w.line < 1 || w.line > len(lines) {
					t.Fatalf("want line %d: the source has %d lines", w.line, len(lines))
				}
				col := strings.Index(lines[w.line-1], expand(w.at))
				if col < 0 {
					t.Fatalf("want %q on line %d: not there: %q", w.at, w.line, lines[w.line-1])
				}
				wantKeys = append(wantKeys, key{w.rule, w.line, col + 1})
			}
			for _, f := range got {
				gotKeys = append(gotKeys, key{f.Rule, f.Line, f.Column})
				if f.Path != tc.path {
					t.Errorf("finding path = %q, want %q", f.Path, tc.path)
				}
				if f.Message == "" || strings.Contains(f.Message, "\n") {
					t.Errorf("finding %s message %q: want one non-empty line", f.Rule, f.Message)
				}
			}
			if !slices.Equal(gotKeys, wantKeys) {
				t.Errorf("findings (rule, line, column):\n got %v\nwant %v", gotKeys, wantKeys)
				for _, f := range got {
					t.Logf("  %d:%d %s %s", f.Line, f.Column, f.Rule, f.Message)
				}
			}
		})
	}
}

// secretCases are the secrets detector's cases: every format once, and its placeholder or
// example twin.
var secretCases = []tcase{
	{"aws access key id", "internal/cloud/s3.go", `package cloud

const accessKeyID = "@AWS_ID@"
`, []want{{"secrets/aws-access-key", 3, "AKIA"}}},
	{"aws documented example keys", "internal/cloud/s3.go", `package cloud

// From the AWS documentation.
const (
	accessKeyID     = "AKIAIOSFODNN7EXAMPLE"
	secretAccessKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)
`, nil},
	{"aws secret access key", "app/storage.py", `import boto3

s3 = boto3.client(
    "s3",
    aws_access_key_id="@AWS_ID@",
    aws_secret_access_key="@AWS_SECRET@",
)
`, []want{{"secrets/aws-access-key", 5, "AKIA"}, {"secrets/aws-secret-key", 6, "8EoK"}}},
	{"aws keys from the environment", "app/storage.py", `import os

import boto3

s3 = boto3.client(
    "s3",
    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
    aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
)
`, nil},
	{"github token", "src/github.js", `import { Octokit } from "@octokit/rest";

const octokit = new Octokit({ auth: "@GH@" });
`, []want{{"secrets/github-token", 3, "ghp_"}}},
	{"github token placeholder and environment", "src/github.js", `import { Octokit } from "@octokit/rest";

const example = new Octokit({ auth: "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" });
const octokit = new Octokit({ auth: process.env.GITHUB_TOKEN });
`, nil},
	{"github fine-grained token in an env file", ".env", `GITHUB_TOKEN=@GH_PAT@
LOG_LEVEL=debug
`, []want{{"secrets/github-token", 1, "github_pat_"}}},
	{"github token placeholder in an env file", ".env.example", `GITHUB_TOKEN=github_pat_your_token_here
DATABASE_PASSWORD=${DATABASE_PASSWORD}
`, nil},
	{"slack token and webhook", "deploy/notify.yaml", `notifications:
  slack:
    bot_token: "@SLACK@"
    webhook: @SLACK_HOOK@
`, []want{{"secrets/slack-token", 3, "xoxb-"}, {"secrets/slack-webhook", 4, "https://hooks"}}},
	{"slack placeholders", "deploy/notify.yaml", `notifications:
  slack:
    bot_token: "xoxb-your-bot-token"
    webhook: https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX
`, nil},
	{"stripe live key", "src/billing.ts", `import Stripe from "stripe";

export const stripe = new Stripe("@STRIPE@", { apiVersion: "2024-06-20" });
`, []want{{"secrets/stripe-key", 3, "sk_live_"}}},
	{"stripe test key and placeholder", "src/billing.ts", `import Stripe from "stripe";

export const sandbox = new Stripe("sk_test_51H8xKz2Lq9Vb3Nm7Tc4Rw6Yp0D");
export const example = new Stripe("sk_live_xxxxxxxxxxxxxxxxxxxxxxxx");
`, nil},
	{"google api key", "src/firebase.js", `const firebaseConfig = {
  apiKey: "@GOOGLE@",
  authDomain: "demo-app.firebaseapp.com",
};
`, []want{{"secrets/google-api-key", 2, "AIza"}}},
	{"google api key placeholder", "src/firebase.js", `const firebaseConfig = {
  apiKey: "<YOUR_FIREBASE_API_KEY>",
  appId: import.meta.env.VITE_FIREBASE_APP_ID,
};
`, nil},
	{"anthropic key", "app/llm.py", `import anthropic

client = anthropic.Anthropic(api_key="@ANTHROPIC@")
`, []want{{"secrets/anthropic-key", 3, "sk-ant-"}}},
	{"anthropic key from the environment", "app/llm.py", `import os

import anthropic

# export ANTHROPIC_API_KEY=sk-ant-...
client = anthropic.Anthropic(api_key=os.environ["ANTHROPIC_API_KEY"])
`, nil},
	{"openai keys", "app/settings.py", `OPENAI_API_KEY = "@OPENAI@"
PROJECT_KEY = "@OPENAI_PROJ@"
`, []want{{"secrets/openai-key", 1, "sk-"}, {"secrets/openai-key", 2, "sk-proj-"}}},
	{"openai placeholder", "app/settings.py", `import os

OPENAI_API_KEY = "sk-your-key-here"
openai_api_key = os.getenv("OPENAI_API_KEY")
`, nil},
	{"private key block", "internal/tlsutil/key.go", `package tlsutil

const serverKey = @BT@@PEM_BEGIN@
@PEM_BODY@
@PEM_END@
@BT@
`, []want{{"secrets/private-key", 3, "-----BEGIN"}}},
	{"public keys, certificates and pem headers", "internal/pemutil/pem.go", `package pemutil

import "strings"

const publicKey = @BT@-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo
4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u
-----END PUBLIC KEY-----
@BT@

const cert = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUX4m2ZB1yY0o7nLwW5bqVcWj0sQ0wCgYIKoZIzj0EAwIw\n-----END CERTIFICATE-----"

// IsPrivateKey reports whether data holds a PEM private key.
func IsPrivateKey(data string) bool {
	return strings.HasPrefix(data, "@PEM_BEGIN@")
}

const docs = "@PEM_BEGIN@\n...\n@PEM_END@"
`, nil},
	{"jwt", "src/api.ts", `export const token = "@JWT@";
`, []want{{"secrets/jwt", 1, "eyJ"}}},
	{"truncated jwt in a comment and a bearer header", "src/api.ts", `// A token looks like "eyJhbGciOiJIUzI1NiIs..."
export const headers = (token: string) => ({ Authorization: @BT@Bearer ${token}@BT@ });
`, nil},
	{"password assigned a literal", "app/db.py", `import psycopg

password = "hunter2hunter2"
conn = psycopg.connect(host="db", password=password)
`, []want{{"secrets/hard-coded-credential", 3, "hunter2"}}},
	{"credentials in go, typescript and json", "internal/auth/client.go", `package auth

func client() *Client {
	token := "Zr4pQ8mX2vL9"
	return &Client{Token: token, APIKey: "q9X2vL7mK4pR8tZ3"}
}
`, []want{{"secrets/hard-coded-credential", 4, "Zr4p"}, {"secrets/hard-coded-credential", 5, "q9X2"}}},
	{"typed password in typescript", "src/db.ts", `export const dbPassword: string = "Tr0ub4dor&3";
`, []want{{"secrets/hard-coded-credential", 1, "Tr0u"}}},
	{"api key in json", "config/app.json", `{
  "service": "billing",
  "apiKey": "q9X2vL7mK4pR8tZ3"
}
`, []want{{"secrets/hard-coded-credential", 3, "q9X2"}}},
	{"credential names without literal credentials", "app/config.py", `import os

password = os.environ["DB_PASSWORD"]
db_password = os.getenv("DB_PASSWORD", "")
password = ""
password = "changeme"
password = "${DB_PASSWORD}"
password = "<your-password>"
password = "********"
api_key = "{{ api_key }}"
password_hint = "use at least twelve characters"
token_url = "https://oauth2.googleapis.com/token"
TOKEN_ENV = "GITHUB_TOKEN"
secret = read_secret("/run/secrets/db_password")
`, nil},
	{"credential names in go without literal credentials", "internal/config/config.go", `package config

import "os"

type DB struct {
	Password string @BT@json:"password" env:"DB_PASSWORD"@BT@
}

const tokenHeader = "X-Auth-Token"

func load(req *ListRequest) DB {
	req.PageToken = "CgRhYmNkEAE"
	password := os.Getenv("DB_PASSWORD")
	return DB{Password: password}
}
`, nil},
	{"compose and helm values", "deploy/docker-compose.yml", `services:
  db:
    environment:
      POSTGRES_PASSWORD: postgres
      APP_DB_PASSWORD: ${APP_DB_PASSWORD:-dev}
      APP_SECRET: {{ .Values.app.secret }}
`, nil},
}

func TestSecrets(t *testing.T) { runTable(t, Secrets, secretCases) }

func TestColumnsCountBytes(t *testing.T) {
	// "é" is two bytes: the key starts at byte 19 of its line, rune 18.
	src := expand("package p\n\nvar s, k = \"é\", \"@AWS_ID@\"\n")
	got, err := Run(Secrets, File{Path: "p.go", Content: src})
	if err != nil || len(got) != 1 {
		t.Fatalf("Run = %v, %v; want one finding", got, err)
	}
	if got[0].Line != 3 || got[0].Column != 19 {
		t.Errorf("finding at %d:%d, want 3:19", got[0].Line, got[0].Column)
	}
}

func TestSecretMessagesAreMasked(t *testing.T) {
	for name, v := range fakes {
		if name == "BT" || strings.HasPrefix(name, "PEM") || strings.HasPrefix(name, "ENTROPY") || name == "HEX64" {
			continue
		}
		// Named so that the AWS secret key, which has no format of its own, is found too;
		// the other formats are reported once, in their own rule.
		src := "const secretAccessKey = \"" + v + "\"\n"
		got, err := Run(Secrets, File{Path: "value.js", Content: src})
		if err != nil || len(got) != 1 {
			t.Errorf("%s: Run = %v, %v; want one finding", name, got, err)
			continue
		}
		msg := got[0].Message
		if strings.Contains(msg, v) || strings.Contains(msg, v[4:]) {
			t.Errorf("%s: message repeats the secret: %q", name, msg)
		}
		if !strings.Contains(msg, v[:4]+"…") {
			t.Errorf("%s: message %q does not name the secret as %q", name, msg, v[:4]+"…")
		}
		if got[0].Severity != typev1.Severity_SEVERITY_ERROR {
			t.Errorf("%s: severity %v, want ERROR", name, got[0].Severity)
		}
	}
	got, err := Run(Entropy, File{Path: "key.go", Content: expand("package p\n\nconst signingKey = \"@ENTROPY32@\"\n")})
	if err != nil || len(got) != 1 {
		t.Fatalf("entropy: Run = %v, %v; want one finding", got, err)
	}
	if strings.Contains(got[0].Message, fakes["ENTROPY32"][4:]) || !strings.Contains(got[0].Message, fakes["ENTROPY32"][:4]+"…") {
		t.Errorf("entropy message %q: want the value masked", got[0].Message)
	}
}

// entropyCases are the entropy detector's cases: random tokens, and the ordinary
// random-looking strings it must leave alone.
var entropyCases = []tcase{
	{"random secret assigned to a credential name", "internal/billing/webhook.go", `package billing

const signingSecret = "@ENTROPY32@"
`, []want{{"entropy/high-entropy-string", 3, "rEHA"}}},
	{"long random literal passed to a call", "src/client.js", `import { createClient } from "./sdk.js";

export const client = createClient("@ENTROPY40@", { retries: 3 });
`, []want{{"entropy/high-entropy-string", 3, "5uFX"}}},
	{"hex key", "app/signing.py", `import hmac

HMAC_KEY = "@HEX64@"
`, []want{{"entropy/high-entropy-string", 3, "4197"}}},
	{"quoted secret in yaml", "deploy/app.yaml", `auth:
  jwt_secret: "@ENTROPY32@"
  issuer: thefold
`, []want{{"entropy/high-entropy-string", 2, "rEHA"}}},
	{"ordinary go file", "internal/server/server.go", `package server

import (
	"context"
	"log/slog"
	"net/http"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

const (
	defaultBaseURL = "https://api.thefold.dev/v1/repositories/acme/widgets?page_size=100"
	requestID      = "3f2b7c1e-9a4d-4e8b-b6f1-2c7d9e0a5b14"
	busyboxSHA256  = "@HEX64@"
	alphabet       = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	opName         = "ConcatPermuteUint16x32GroupedPairs"
	pixel          = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	metricName     = "thefold_skills_postrun_duration_seconds_bucket"
)

var severity = typev1.Severity_SEVERITY_ERROR

func handle(ctx context.Context, w http.ResponseWriter) {
	slog.InfoContext(ctx, "the repository index was rebuilt after the upstream mirror reported a checksum mismatch", "url", defaultBaseURL, "id", requestID)
	http.Error(w, "the request could not be authorised because the bearer token had expired", http.StatusUnauthorized)
	_ = pixel + alphabet + opName + metricName + busyboxSHA256
}
`, nil},
	{"test vectors in a go test", "internal/hash/hash_test.go", `package hash

import "testing"

func TestSum(t *testing.T) {
	want := "@HEX64@"
	expected := "@ENTROPY40@"
	if got := Sum("abc"); got != want && got != expected {
		t.Fatal(got)
	}
}
`, nil},
	{"test data", "internal/hash/testdata/tokens.json", `{"token": "@ENTROPY40@"}
`, nil},
	{"go.sum", "go.sum", `github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=
github.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=
`, nil},
	{"package-lock.json", "web/package-lock.json", `{
  "packages": {
    "node_modules/react": {
      "version": "18.3.1",
      "integrity": "sha512-wS+hAgJShR0KhEvPJArfuPVN1+Hz1t0Y6n5jLrGQbkb4urgPE/0Rve+1kMB1v/oWgHgm4WIcV+i7F2pTVj+2iQ=="
    }
  }
}
`, nil},
	{"minified javascript", "web/vendor/lib.min.js", `var k="@ENTROPY40@";
`, nil},
	{"subresource integrity in html", "web/index.html", `<script src="https://cdn.example.org/lib.js" integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC" crossorigin="anonymous"></script>
`, nil},
	{"ordinary python file", "app/jobs.py", `import logging

logger = logging.getLogger(__name__)
BASE_URL = "https://storage.googleapis.com/thefold-artifacts/releases/v1.4.2/manifest.json"
JOB_ID = "6c1f1b8e-2f4a-4d3b-9a71-0c5e3f6d2b19"


def run():
    logger.info("the nightly export finished and uploaded every artifact to the bucket")
`, nil},
}

func TestEntropy(t *testing.T) { runTable(t, Entropy, entropyCases) }

// dangerousCases are the dangerous-API detector's cases: every rule in its language,
// and its safe twin.
var dangerousCases = []tcase{
	// Go.
	{"go: tls verification disabled", "internal/netx/client.go", `package netx

import (
	"crypto/tls"
	"net/http"
)

func insecureClient() *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	return &http.Client{Transport: tr}
}

func patch(cfg *tls.Config) {
	cfg.InsecureSkipVerify = true
}
`, []want{{"go/insecure-skip-verify", 9, "InsecureSkipVerify"}, {"go/insecure-skip-verify", 14, "InsecureSkipVerify"}}},
	{"go: tls verification kept or configured", "internal/netx/client.go", `package netx

import "crypto/tls"

type Options struct{ Insecure bool }

func config(o Options) *tls.Config {
	strict := &tls.Config{InsecureSkipVerify: false, MinVersion: tls.VersionTLS12}
	_ = strict
	return &tls.Config{InsecureSkipVerify: o.Insecure}
}
`, nil},
	{"go: shell command built from input", "internal/gitx/clone.go", `package gitx

import (
	"context"
	"fmt"
	"os/exec"
)

func Clone(ctx context.Context, repo, dir string) error {
	if err := exec.Command("sh", "-c", "git clone "+repo+" "+dir).Run(); err != nil {
		return err
	}
	script := fmt.Sprintf("tar -xzf %s -C %s", dir+".tgz", dir)
	if err := exec.CommandContext(ctx, "/bin/bash", "-c", script).Run(); err != nil {
		return err
	}
	return exec.CommandContext(ctx, "bash", "-c", fmt.Sprintf("rm -rf %q", dir)).Run()
}
`, []want{{"go/shell-injection", 10, `"git clone "`}, {"go/shell-injection", 14, "script"}, {"go/shell-injection", 17, "fmt.Sprintf"}}},
	{"go: commands with separate arguments", "internal/gitx/status.go", `package gitx

import (
	"context"
	"os/exec"
)

func Status(ctx context.Context, dir, repo string) error {
	if err := exec.Command("git", "status").Run(); err != nil {
		return err
	}
	if err := exec.CommandContext(ctx, "git", "clone", "--depth=1", repo, dir).Run(); err != nil {
		return err
	}
	return exec.Command("sh", "-c", "echo ready | tee /tmp/ready").Run()
}
`, nil},
	{"go: sql built from input", "internal/users/find.go", `package users

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

func Find(ctx context.Context, db *sql.DB, pool *pgxpool.Pool, name, email, id string) error {
	rows, err := db.Query("SELECT id, name FROM users WHERE name = '" + name + "'")
	if err != nil {
		return err
	}
	defer rows.Close()
	row := db.QueryRowContext(ctx, fmt.Sprintf("SELECT id FROM users WHERE email = '%s'", email))
	_ = row
	if _, err := pool.Exec(ctx, "DELETE FROM sessions WHERE user_id = "+id); err != nil {
		return err
	}
	q := fmt.Sprintf("UPDATE users SET last_seen = now() WHERE name LIKE '%%%s%%'", name)
	_, err = db.ExecContext(ctx, q)
	return err
}
`, []want{{"go/sql-concat", 12, `"SELECT id, name`}, {"go/sql-concat", 17, "fmt.Sprintf"}, {"go/sql-concat", 19, `"DELETE`}, {"go/sql-concat", 23, "q)"}}},
	{"go: parameterised and dynamic-but-safe sql", "internal/users/list.go", `package users

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

const userColumns = "id, name, email"

func List(ctx context.Context, db *sql.DB, conn *pgx.Conn, u *url.URL, id, role string, limit int, filters []string) error {
	if _, err := db.Query("SELECT id, name FROM users WHERE id = $1", id); err != nil {
		return err
	}
	if _, err := db.Query("SELECT id FROM users " + "WHERE active"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()); err != nil {
		return err
	}
	where := "active"
	if len(filters) > 0 {
		where = strings.Join(filters, " AND ")
	}
	query := "SELECT " + userColumns + " FROM users WHERE " + where + fmt.Sprintf(" LIMIT %d", limit)
	if _, err := db.QueryContext(ctx, query, id); err != nil {
		return err
	}
	if _, err := db.Query("SELECT name FROM users WHERE id = " + strconv.Itoa(limit)); err != nil {
		return err
	}
	_ = u.Query()
	return nil
}
`, nil},
	{"go: html/template bypassed", "internal/web/profile.go", `package web

import "html/template"

type Profile struct{ Bio string }

func bio(p Profile) template.HTML {
	return template.HTML(p.Bio)
}
`, []want{{"go/unescaped-html", 8, "template.HTML("}}},
	{"go: constant html", "internal/web/notice.go", `package web

import "html/template"

const banner = "<strong>maintenance tonight</strong>"

func notices() []template.HTML {
	return []template.HTML{template.HTML("<br>"), template.HTML(banner)}
}
`, nil},
	{"go: a file that does not parse", "internal/broken/broken.go", `package broken

func f( {
	_ = &tls.Config{InsecureSkipVerify: true}
`, nil},

	// JavaScript and TypeScript.
	{"js: eval", "src/calc.js", `export function calculate(expression) {
  return eval(expression);
}

export function run(code) {
  return window.eval(code);
}
`, []want{{"js/eval", 2, "eval"}, {"js/eval", 6, "eval(code)"}}},
	{"js: eval look-alikes", "src/model.ts", `// Never call eval(userInput) here: expressions are parsed by the grammar.
const note = "eval(x) is not used";
export async function evaluate(model: Model, input: Tensor): Promise<number> {
  model.eval();
  const total = await page.$eval("#total", (el) => el.textContent);
  const two = eval("1 + 1");
  return evaluate(model, input) + Number(total) + two;
}

class Interpreter {
  eval(expr: string): number {
    return this.parse(expr).value;
  }
}
`, nil},
	{"js: new Function", "src/template.js", `export function compile(body) {
  return new Function("data", body);
}
`, []want{{"js/new-function", 2, "new Function"}}},
	{"js: shell command built from input", "scripts/deploy.js", `const { exec, execSync } = require("child_process");
const util = require("util");
const execAsync = util.promisify(exec);

function deploy(branch, dir) {
  exec(@BT@git checkout ${branch}@BT@, (err) => console.error(err));
  execSync("rm -rf " + dir);
  return execAsync(@BT@git push origin ${branch}@BT@);
}
`, []want{{"js/shell-injection", 6, "@BT@git checkout"}, {"js/shell-injection", 7, `"rm -rf "`}, {"js/shell-injection", 8, "@BT@git push"}}},
	{"js: fixed commands and RegExp.exec", "scripts/build.js", `import { exec, execFile } from "node:child_process";

const VERSION_RE = /v(\d+)\.(\d+)/;

export function build(dir) {
  exec("npm run build", { cwd: dir });
  execFile("git", ["tag", dir]);
  return VERSION_RE.exec(dir);
}
`, nil},
	{"js: RegExp.exec without child_process", "src/parse.js", `const re = /(\w+)=(\w+)/g;
export function pairs(s, key) {
  return re.exec(@BT@${key}=${s}@BT@);
}
`, nil},
	{"js: html from values", "src/render.js", `export function render(el, user) {
  el.innerHTML = "";
  el.innerHTML = @BT@<h1>${user.name}</h1>@BT@;
  el.querySelector(".bio").innerHTML = user.bio;
}
`, []want{{"js/unescaped-html", 3, "innerHTML"}, {"js/unescaped-html", 4, "innerHTML"}}},
	{"jsx: dangerouslySetInnerHTML", "src/Bio.tsx", `export function Bio({ html }: { html: string }) {
  return <div dangerouslySetInnerHTML={{ __html: html }} />;
}

export function Spacer() {
  return <div dangerouslySetInnerHTML={{ __html: "<br/>" }} />;
}
`, []want{{"js/unescaped-html", 2, "dangerouslySetInnerHTML"}}},
	{"js: tls verification disabled", "src/http.ts", `import https from "node:https";

export const agent = new https.Agent({ keepAlive: true, rejectUnauthorized: false });
process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
`, []want{{"js/tls-verify-off", 3, "rejectUnauthorized"}, {"js/tls-verify-off", 4, "NODE_TLS"}}},
	{"js: tls verification kept", "src/http.ts", `import https from "node:https";

export function agent(ca: string, strict: boolean) {
  const secure = new https.Agent({ ca, rejectUnauthorized: true });
  const opts = { strictSsl: strict ? !!secure.options.rejectUnauthorized : false };
  return { secure, opts };
}
`, nil},
	{"js: sql built from input", "src/db.ts", `import { pool } from "./pool";

export async function findUser(req: Request) {
  const byId = await pool.query(@BT@SELECT * FROM users WHERE id = ${req.params.id}@BT@);
  const byName = await pool.query("SELECT * FROM users WHERE name = '" + req.query.name + "'");
  const sql = @BT@DELETE FROM sessions WHERE token = '${req.headers.token}'@BT@;
  await pool.execute(sql);
  return [byId, byName];
}
`, []want{{"js/sql-concat", 4, "@BT@SELECT"}, {"js/sql-concat", 5, `"SELECT`}, {"js/sql-concat", 7, "sql)"}}},
	{"js: parameterised sql", "src/repo.js", `export async function list(db, knex, sql, id, cols) {
  await db.query("SELECT * FROM users WHERE id = $1", [id]);
  await db.query(sql@BT@SELECT * FROM users WHERE id = ${id}@BT@);
  await knex.raw("select * from users where id = ?", [id]);
  await db.query(@BT@SELECT ${cols.join(", ")} FROM users WHERE id = $1@BT@, [id]);
  return db.query(@BT@SELECT count(*) FROM users@BT@);
}
`, nil},

	// Python.
	{"py: eval and exec", "app/calc.py", `def calculate(expression):
    return eval(expression)


def run(source):
    exec(source, {"__builtins__": {}})
`, []want{{"py/eval", 2, "eval"}, {"py/eval", 6, "exec"}}},
	{"py: eval look-alikes", "app/model.py", `import ast

# eval(user_input) would run arbitrary code, so literals are parsed instead.
HELP = "never call eval(x) on input"


class Scorer:
    def eval(self):
        self.model.eval()
        return ast.literal_eval(self.raw)


def two():
    return eval("1 + 1")
`, nil},
	{"py: shell command built from input", "app/convert.py", `import os
import subprocess


def convert(path, out):
    subprocess.run(f"convert {path} {out}", shell=True, check=True)
    os.system("rm -rf " + out)
    return subprocess.check_output("identify %s" % path, shell=True)
`, []want{{"py/shell-injection", 6, `f"convert`}, {"py/shell-injection", 7, `"rm -rf "`}, {"py/shell-injection", 8, `"identify`}}},
	{"py: commands without a shell", "app/convert.py", `import os
import subprocess


def convert(path, out):
    subprocess.run(["convert", path, out], check=True)
    subprocess.run("ls -la", shell=True)
    os.system("clear")
    return subprocess.check_output(["identify", path])
`, nil},
	{"py: pickle and yaml.load", "app/cache.py", `import pickle

import yaml


def load(blob, stream):
    obj = pickle.loads(blob)
    cfg = yaml.load(stream)
    return obj, cfg
`, []want{{"py/pickle", 7, "pickle.loads"}, {"py/yaml-load", 8, "yaml.load"}}},
	{"py: safe loaders", "app/cache.py", `import json

import yaml


def load(blob, stream, other):
    obj = json.loads(blob)
    cfg = yaml.safe_load(stream)
    more = yaml.load(other, Loader=yaml.SafeLoader)
    return obj, cfg, more
`, nil},
	{"py: tls verification disabled", "app/fetch.py", `import requests


def fetch(url):
    return requests.get(url, timeout=10, verify=False)
`, []want{{"py/tls-verify-off", 5, "verify=False"}}},
	{"py: tls verification configured", "app/fetch.py", `import requests

verify = False  # a flag of this module, not a TLS setting


def fetch(url, ca_bundle):
    return requests.get(url, verify=ca_bundle)
`, nil},
	{"py: sql built from input", "app/users.py", `def find(cursor, name, user_id, email):
    cursor.execute(f"SELECT * FROM users WHERE name = '{name}'")
    cursor.execute("SELECT * FROM users WHERE id = %s" % user_id)
    cursor.execute("SELECT * FROM users WHERE email = '{}'".format(email))
    query = f"DELETE FROM sessions WHERE user_id = {user_id}"
    cursor.execute(query)
`, []want{{"py/sql-concat", 2, `f"SELECT`}, {"py/sql-concat", 3, `"SELECT`}, {"py/sql-concat", 4, `"SELECT`}, {"py/sql-concat", 6, "query)"}}},
	{"py: parameterised sql", "app/users.py", `def find(cursor, user_id, columns):
    cursor.execute("SELECT * FROM users WHERE id = %s", (user_id,))
    cursor.execute(f"SELECT {', '.join(columns)} FROM users WHERE id = %s", (user_id,))
    query = "SELECT count(*) FROM users"
    cursor.execute(query)
`, nil},

	// Other languages have no rules.
	{"ruby", "lib/calc.rb", `def calculate(params)
  eval(params[:code])
end
`, nil},
}

func TestDangerousAPI(t *testing.T) { runTable(t, DangerousAPI, dangerousCases) }

func TestRunUnknownDetector(t *testing.T) {
	_, err := Run("regex", File{Path: "a.go", Content: "package a\n"})
	if err == nil {
		t.Fatal("Run(\"regex\") succeeded, want an error")
	}
	for _, n := range Names() {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not list detector %q", err, n)
		}
	}
}

func TestNames(t *testing.T) {
	want := []string{"secrets", "entropy", "dangerous-api"}
	if got := Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, n := range Names() {
		if _, err := Run(n, File{Path: "empty.go"}); err != nil {
			t.Errorf("Run(%q) on an empty file: %v", n, err)
		}
	}
}

func TestLanguage(t *testing.T) {
	for p, want := range map[string]string{
		"main.go":              "go",
		"cmd/thefold/main.go":  "go",
		"src/App.tsx":          "typescript",
		"src/index.ts":         "typescript",
		"types/index.d.ts":     "typescript",
		"lib/server.mts":       "typescript",
		"src/app.js":           "javascript",
		"src/App.JSX":          "javascript",
		"lib/esm.mjs":          "javascript",
		"lib/cjs.cjs":          "javascript",
		"app/main.py":          "python",
		"stubs/typing.pyi":     "python",
		"lib/calc.rb":          "",
		"README.md":            "",
		"Makefile":             "",
		".env":                 "",
		"go.mod":               "",
		"deploy/compose.yaml":  "",
		"scripts/archive.gz":   "",
		"dir.go/file":          "",
		"internal/x/y_test.go": "go",
	} {
		if got := Language(p); got != want {
			t.Errorf("Language(%q) = %q, want %q", p, got, want)
		}
	}
}

func TestFindingsAreSorted(t *testing.T) {
	// The formats are searched one after another (AWS before GitHub before JWT), so
	// these findings are produced out of order and Run must sort them.
	src := expand(`export const session = "@JWT@";
export const gh = "@GH@", aws = "@AWS_ID@";
export const stripe = "@STRIPE@";
export const aws2 = "@AWS_ID@";
`)
	got, err := Run(Secrets, File{Path: "src/keys.ts", Content: src})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("got %d findings, want 5: %v", len(got), got)
	}
	less := func(a, b Finding) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		if a.Column != b.Column {
			return a.Column - b.Column
		}
		return strings.Compare(a.Rule, b.Rule)
	}
	if !slices.IsSortedFunc(got, less) {
		t.Errorf("findings are not sorted by line, column, rule: %v", got)
	}
	if got[1].Rule != "secrets/github-token" || got[2].Rule != "secrets/aws-access-key" {
		t.Errorf("line 2: got %s then %s, want the GitHub token (left) before the AWS key", got[1].Rule, got[2].Rule)
	}
}

// TestTruncatedInput runs every detector over every prefix (in steps) of every test
// source: half-written files must not make a detector fail.
func TestTruncatedInput(t *testing.T) {
	t.Parallel()
	// One goroutine's computation: the race detector multiplies its time by ten and finds
	// nothing in it (make test-unit runs it without -race).
	testenv.CPUBound(t)
	for _, cases := range [][]tcase{secretCases, entropyCases, dangerousCases} {
		for _, tc := range cases {
			src := expand(tc.src)
			for n := 0; n <= len(src); n += 3 {
				for _, d := range Names() {
					if _, err := Run(d, File{Path: tc.path, Content: src[:n]}); err != nil {
						t.Fatalf("%s on %s truncated to %d bytes: %v", d, tc.path, n, err)
					}
				}
			}
		}
	}
}

// knownPkgFindings are ERROR findings on ../../../../pkg that were checked by hand and
// are genuine. It is empty: TheFold's shared code has none.
var knownPkgFindings = map[string]bool{}

// TestNoFalsePositivesOnPkg is the false-positive guard on real code: every detector
// runs over every Go file of the repository's pkg module (testdata excluded), which is
// reviewed, idiomatic Go with SQL, TLS, exec, tokens and keys handling, and must not
// produce an ERROR finding that is not listed in knownPkgFindings.
func TestNoFalsePositivesOnPkg(t *testing.T) {
	t.Parallel()
	// One goroutine's computation: the race detector multiplies its time by ten and finds
	// nothing in it (make test-unit runs it without -race).
	testenv.CPUBound(t)
	root, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "pkg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the pkg module is not at %s: %v", root, err)
	}
	repo := filepath.Dir(root)
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repo, p)
		if err != nil {
			return err
		}
		files++
		f := File{Path: filepath.ToSlash(rel), Content: string(b)}
		for _, name := range Names() {
			found, err := Run(name, f)
			if err != nil {
				t.Errorf("%s on %s: %v", name, f.Path, err)
				continue
			}
			for _, x := range found {
				if x.Severity < typev1.Severity_SEVERITY_ERROR {
					continue
				}
				if id := x.Path + ":" + x.Rule; !knownPkgFindings[id] {
					t.Errorf("%s:%d:%d: %s %s: %s", x.Path, x.Line, x.Column, name, x.Rule, x.Message)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Errorf("checked only %d Go files under %s, want the whole pkg module", files, root)
	}
}

// Every format's need holds: each match of its expression in every secrets case (the
// placeholders, look-alikes and real-looking keys) contains one of its literals, and each
// format matches somewhere, so that the check says something for all of them. A need that
// a match can lack would hide that credential from detectSecrets.
func TestSecretFormatsNeedTheirLiterals(t *testing.T) {
	t.Parallel()
	matched := make([]int, len(secretFormats))
	for _, tc := range secretCases {
		src := expand(tc.src)
		for i, p := range secretFormats {
			if len(p.need) == 0 {
				t.Fatalf("%s (%s): no literals to look for", p.rule, p.what)
			}
			for _, m := range p.re.FindAllString(src, -1) {
				matched[i]++
				if !containsAny(m, p.need) {
					t.Errorf("%s (%s): match %q in case %q contains none of %q", p.rule, p.what, m, tc.name, p.need)
				}
			}
		}
	}
	for i, p := range secretFormats {
		if matched[i] == 0 {
			t.Errorf("%s (%s): no secrets case matches %s", p.rule, p.what, p.re)
		}
	}
}
