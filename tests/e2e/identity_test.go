package e2e

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/stack"
)

// TestAdminTokenExpires: the token `thefold up` leaves behind carries exp, within the
// default lifetime.
func TestAdminTokenExpires(t *testing.T) {
	alone(t)
	code, body := rest(t, "GET", "/v1/auth/whoami", token, nil)
	if code != http.StatusOK {
		t.Fatalf("whoami = %d %v", code, body)
	}
	exp, err := time.Parse(time.RFC3339, body["expire_time"].(string))
	if err != nil {
		t.Fatalf("admin token without expiry: %v (%v)", err, body)
	}
	if left := time.Until(exp); left <= 0 || left > stack.DefaultAdminTokenTTL {
		t.Fatalf("admin token expires in %s", left)
	}
}

// TestServiceIdentityAcrossTheMesh: a token the agent mints with the key the launcher gave
// it reaches another service (here the gateway's WhoAmI) as the owner it acts for; one
// minted too long ago is refused.
func TestServiceIdentityAcrossTheMesh(t *testing.T) {
	parallel(t)
	key, err := auth.LoadPrivateKey(auth.ServicePrivateKeyPath(mesh.KeyDir(), "agent"))
	if err != nil {
		t.Fatal(err)
	}
	agent, err := auth.NewServiceSigner("agent", key)
	if err != nil {
		t.Fatal(err)
	}
	stale, _ := auth.NewServiceSigner("agent", key, auth.WithClock(func() time.Time { return time.Now().Add(-time.Hour) }))
	conn, err := grpcclient.Dial(mesh.GRPCAddr("gateway"), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := gatewayv1.NewAuthServiceClient(conn)

	resp, err := client.WhoAmI(auth.OnBehalfOf(t.Context(), agent, "owner-e2e"), &gatewayv1.WhoAmIRequest{})
	if err != nil || resp.GetUserId() != "owner-e2e" {
		t.Fatalf("agent on behalf of owner-e2e: %v, %v", resp, err)
	}
	if _, err := client.WhoAmI(auth.OnBehalfOf(t.Context(), stale, "owner-e2e"), &gatewayv1.WhoAmIRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("expired service token: %v, want Unauthenticated", err)
	}
}
