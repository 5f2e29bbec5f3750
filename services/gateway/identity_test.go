package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/db/dbtest"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/stack"
)

// running is a gateway started by startGateway.
type running struct {
	httpURL string
	auth    gatewayv1.AuthServiceClient
	users   gatewayv1.UserServiceClient
}

// startGateway runs the gateway as `thefold up` does, with the keys and files of st (whose
// credentials exist), until the test ends; extra adds settings. It returns once the gateway
// answers adminToken.
func startGateway(t *testing.T, st *stack.Stack, adminToken string, extra map[string]string) running {
	t.Helper()
	keys := st.KeyDir()
	grpcAddr, httpAddr := grpctest.FreeAddr(t), grpctest.FreeAddr(t)
	env := map[string]string{
		"THEFOLD_DATABASE_URL":                    dbtest.NewEmptyDatabase(t),
		"THEFOLD_GRPC_ADDR":                       grpcAddr,
		"THEFOLD_ADMIN_ADDR":                      grpctest.FreeAddr(t),
		"THEFOLD_HTTP_ADDR":                       httpAddr,
		"THEFOLD_GATEWAY_ADDR":                    grpcAddr, // the edge and the revocation follower dial the gateway itself
		"THEFOLD_AUTH_PUBLIC_KEY_FILE":            filepath.Join(keys, auth.PublicKeyFile),
		"THEFOLD_AUTH_SIGNING_KEY_FILE":           filepath.Join(keys, auth.PrivateKeyFile),
		"THEFOLD_AUTH_SERVICE_KEYS_DIR":           filepath.Join(keys, auth.ServiceKeysDir),
		"THEFOLD_AUTH_SERVICE_KEY_FILE":           auth.ServicePrivateKeyPath(keys, "gateway"),
		"THEFOLD_AUTH_REPLACED_ADMIN_TOKENS_FILE": st.ReplacedTokensPath(),
	}
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- platform.Run(ctx, service, config.Map(env, platform.Defaults("gateway")), nil, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("gateway did not stop")
		}
	})
	conn, err := grpcclient.Dial(grpcAddr, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	g := running{httpURL: "http://" + httpAddr, auth: gatewayv1.NewAuthServiceClient(conn), users: gatewayv1.NewUserServiceClient(conn)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := whoAmI(t, g, adminToken); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("gateway stopped: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway never answered the admin token")
		}
	}
	return g
}

func whoAmI(t *testing.T, g running, tok string) (*gatewayv1.WhoAmIResponse, error) {
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok), 5*time.Second)
	defer cancel()
	return g.auth.WhoAmI(ctx, &gatewayv1.WhoAmIRequest{})
}

// refusedWithin waits until tok is refused, failing the test after d.
func refusedWithin(t *testing.T, g running, what, tok string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, err := whoAmI(t, g, tok)
		if status.Code(err) == codes.Unauthenticated {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepted after %s (%v)", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAdminTokenReissueRevokesThePrevious: `thefold token` replacing the admin token
// revokes the one it replaced — before the gateway starts, and while it runs — and the
// current one works.
func TestAdminTokenReissueRevokesThePrevious(t *testing.T) {
	t.Parallel()
	st := &stack.Stack{DataDir: t.TempDir()}
	first, err := st.EnsureCredentials()
	if err != nil {
		t.Fatal(err)
	}
	second, err := st.IssueAdminToken() // replaced while the gateway is down
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, st, second, nil)
	refusedWithin(t, g, "the admin token replaced before the start", first, 5*time.Second)

	third, err := st.IssueAdminToken() // replaced while it runs
	if err != nil {
		t.Fatal(err)
	}
	refusedWithin(t, g, "the admin token replaced while the gateway runs", second, 15*time.Second)
	who, err := whoAmI(t, g, third)
	if err != nil || who.GetUserId() != "admin" || who.GetRole() != gatewayv1.Role_ROLE_ADMIN {
		t.Fatalf("the current admin token: %v, %v", who, err)
	}
	if left := time.Until(who.GetExpireTime().AsTime()); left > stack.DefaultAdminTokenTTL || left < stack.DefaultAdminTokenTTL-time.Minute {
		t.Errorf("the admin token expires in %s, want %s", left, stack.DefaultAdminTokenTTL)
	}
}

// TestEdgeForwardsTheClientAddress: through the REST edge the login audit records the
// client's address as the edge established it — a client's own X-Forwarded-For is
// ignored, one from a proxy in THEFOLD_HTTP_TRUSTED_PROXIES is believed — and the code
// request limits key on it.
func TestEdgeForwardsTheClientAddress(t *testing.T) {
	t.Parallel()
	st := &stack.Stack{DataDir: t.TempDir()}
	admin, err := st.EnsureCredentials()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, proxies, wantPrefix string
	}{
		{"client's own header", "", "127.0.0.1:"},
		{"trusted proxy", "127.0.0.1", "203.0.113.7 via 127.0.0.1:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := startGateway(t, st, admin, map[string]string{"THEFOLD_HTTP_TRUSTED_PROXIES": tc.proxies,
				"THEFOLD_LOGIN_CODES_PER_CLIENT": "1"})
			post := func(xff, email string) *http.Response {
				t.Helper()
				req, _ := http.NewRequest("POST", g.httpURL+"/v1/auth/login-code", strings.NewReader(`{"email":"`+email+`"}`))
				req.Header.Set("X-Forwarded-For", xff)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				return resp
			}
			if resp := post("203.0.113.7", "ada@example.com"); resp.StatusCode != http.StatusOK {
				t.Fatalf("login-code = %d", resp.StatusCode)
			}
			req, _ := http.NewRequest("GET", g.httpURL+"/v1/users:loginAttempts?email=ada@example.com", nil)
			req.Header.Set("Authorization", "Bearer "+admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Attempts []struct {
					Peer string `json:"peer"`
				} `json:"attempts"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Attempts) != 1 {
				t.Fatalf("login-attempts = %d %+v, %v", resp.StatusCode, body, err)
			}
			if p := body.Attempts[0].Peer; !strings.HasPrefix(p, tc.wantPrefix) {
				t.Errorf("audited peer %q, want %s…", p, tc.wantPrefix)
			}
			// The limit of one code request per client: behind a trusted proxy another client
			// is another budget; without one, another header is the same client.
			want := http.StatusTooManyRequests
			if tc.proxies != "" {
				want = http.StatusOK
			}
			if resp := post("203.0.113.8", "bob@example.com"); resp.StatusCode != want {
				t.Errorf("a second code request claiming another address = %d, want %d", resp.StatusCode, want)
			}
		})
	}
}
