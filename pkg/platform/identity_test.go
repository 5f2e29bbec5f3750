package platform_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/platform"
)

// TestServeWiresIdentity runs a service as `thefold up` configures one with a service
// identity: its calls for an owner reach a handler (here its own) as that owner, and user
// tokens over the configured maximum lifetime are refused.
func TestServeWiresIdentity(t *testing.T) {
	t.Parallel()
	url := dbtest.NewEmptyDatabase(t)
	keys := t.TempDir()
	userKey, _, err := auth.EnsureKeyPair(keys)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.EnsureServiceKeyPair(keys, "probe"); err != nil {
		t.Fatal(err)
	}
	grpcAddr, admin := grpctest.FreeAddr(t), grpctest.FreeAddr(t)
	env := map[string]string{
		"THEFOLD_DATABASE_URL":            url,
		"THEFOLD_GRPC_ADDR":               grpcAddr,
		"THEFOLD_ADMIN_ADDR":              admin,
		"THEFOLD_AUTH_PUBLIC_KEY_FILE":    filepath.Join(keys, auth.PublicKeyFile),
		"THEFOLD_AUTH_MAX_TOKEN_LIFETIME": "2h",
		"THEFOLD_AUTH_SERVICE_KEYS_DIR":   filepath.Join(keys, auth.ServiceKeysDir),
		"THEFOLD_AUTH_SERVICE_KEY_FILE":   auth.ServicePrivateKeyPath(keys, "probe"),
		// Only the services named may act for an owner (by default the agent and builder).
		"THEFOLD_AUTH_ON_BEHALF_OF_SERVICES": "agent,probe",
	}
	signers := make(chan *auth.ServiceSigner, 1)
	svc := platform.Service{Name: "probe", Schema: "probe", Migrations: migrations,
		Register: func(ctx context.Context, d *platform.Deps) error {
			grpctest.RegisterIdentityProbe(d.Server.GRPC())
			signers <- d.ServiceSigner
			return nil
		}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- platform.Run(ctx, svc, config.Map(env, nil), nil, io.Discard) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	identityWaitReady(t, admin, done)

	signer := <-signers
	if signer == nil || signer.Name() != "probe" {
		t.Fatalf("Deps.ServiceSigner = %v", signer)
	}
	conn, err := grpcclient.Dial(grpcAddr, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// A job whose context still holds its owner's long-expired principal calls as the service.
	expired := auth.WithPrincipal(t.Context(), auth.Principal{UserID: "owner-1", Token: "expired-user-token"})
	got, err := grpctest.WhoAmI(auth.OnBehalfOf(expired, signer, "owner-1"), conn)
	if want := (grpctest.Identity{UserID: "owner-1", Service: "probe"}); err != nil || got != want {
		t.Fatalf("on behalf of owner-1: %+v, %v; want %+v", got, err, want)
	}

	signer2h := auth.NewSigner(userKey, auth.WithMaxLifetime(24*time.Hour))
	for _, tc := range []struct {
		ttl  time.Duration
		want codes.Code
	}{{2 * time.Hour, codes.OK}, {3 * time.Hour, codes.Unauthenticated}} {
		tok, _, err := signer2h.Issue("u1", []string{auth.RoleUser}, tc.ttl)
		if err != nil {
			t.Fatal(err)
		}
		_, err = grpctest.WhoAmI(metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok), conn)
		if status.Code(err) != tc.want {
			t.Errorf("user token of %s: %v, want %v (THEFOLD_AUTH_MAX_TOKEN_LIFETIME=2h)", tc.ttl, err, tc.want)
		}
	}
}

func identityWaitReady(t *testing.T, admin string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("service never became ready")
		}
	}
}
