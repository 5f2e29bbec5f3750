package grpctest_test

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/grpctest"
)

func withBearer(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

func TestServiceIdentityReachesHandlers(t *testing.T) {
	t.Parallel()
	env := grpctest.Start(t, grpctest.RegisterIdentityProbe)
	now := time.Now()

	// A token signed by the user key claiming to be the agent acting for an owner.
	forged, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: auth.ServiceIssuer, Audience: jwt.ClaimStrings{auth.Audience}, Subject: "service:agent",
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)),
		},
		OnBehalfOf: "owner-1",
	}).SignedString(env.SigningKey)
	if err != nil {
		t.Fatal(err)
	}
	// A user token, properly signed, that tries to act for someone else.
	userOBO, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: auth.Issuer, Audience: jwt.ClaimStrings{auth.Audience}, Subject: "mallory",
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		OnBehalfOf: "owner-1",
	}).SignedString(env.SigningKey)
	if err != nil {
		t.Fatal(err)
	}
	stale := env.ServiceSigner(t, "agent", auth.WithClock(func() time.Time { return now.Add(-time.Hour) }))
	unknownKey, err := auth.NewServiceSigner("agent", env.SigningKey) // right name, user key
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name        string
		ctx         context.Context
		wantCode    codes.Code
		wantUser    string
		wantService string
	}{
		{"agent for an owner", env.ServiceContext(t, "agent", "owner-1"), codes.OK, "owner-1", "agent"},
		{"builder for an owner", env.ServiceContext(t, "builder", "owner-2"), codes.OK, "owner-2", "builder"},
		{"the owner themself", env.Context(t, "owner-1"), codes.OK, "owner-1", ""},
		{"expired service token", auth.OnBehalfOf(context.Background(), stale, "owner-1"), codes.Unauthenticated, "", ""},
		{"service token signed with a non-service key", auth.OnBehalfOf(context.Background(), unknownKey, "owner-1"), codes.Unauthenticated, "", ""},
		{"forged service claims", withBearer(forged), codes.Unauthenticated, "", ""},
		{"user token with on_behalf_of", withBearer(userOBO), codes.Unauthenticated, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := grpctest.WhoAmI(tc.ctx, env.Conn)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("code = %v (%v), want %v", status.Code(err), err, tc.wantCode)
			}
			if err != nil {
				return
			}
			if want := (grpctest.Identity{UserID: tc.wantUser, Service: tc.wantService}); got != want {
				t.Fatalf("handler saw %+v, want %+v", got, want)
			}
		})
	}
}
