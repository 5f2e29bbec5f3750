package auth

import (
	"context"
	"testing"
)

func TestCallerKey(t *testing.T) {
	cases := []struct {
		p    Principal
		want string
	}{
		{Principal{UserID: "u1"}, "user:u1"},
		{Principal{UserID: "u1", APIKeyID: "k1", Scopes: []string{"tasks:read"}}, "user:u1"},
		{Principal{UserID: "u1", Service: "agent"}, "service:agent/u1"},
		{Principal{Service: "tasks"}, "service:tasks/"},
	}
	for _, tc := range cases {
		if got := CallerKey(tc.p); got != tc.want {
			t.Errorf("CallerKey(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
	if _, ok := CallerKeyFromContext(context.Background()); ok {
		t.Error("a key without a principal")
	}
	if k, ok := CallerKeyFromContext(WithPrincipal(context.Background(), Principal{UserID: "u2"})); !ok || k != "user:u2" {
		t.Errorf("CallerKeyFromContext = %q %v", k, ok)
	}
}
