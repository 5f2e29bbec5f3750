package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func newKeys(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func TestIssueVerify(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	otherPub, otherPriv := newKeys(t)
	_ = otherPub
	s := NewSigner(priv)
	v := NewVerifier(pub)

	tok, issued, err := s.Issue("u1", []string{RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != "u1" || !p.HasRole(RoleUser) || p.HasRole(RoleAdmin) || p.TokenID != issued.TokenID {
		t.Fatalf("principal = %+v", p)
	}

	expired := NewSigner(priv, WithClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }))
	expTok, _, _ := expired.Issue("u1", nil, time.Hour)
	forged, _, _ := NewSigner(otherPriv).Issue("u1", []string{RoleAdmin}, time.Hour)

	for name, tok := range map[string]string{"expired": expTok, "other key": forged, "garbage": "abc.def.ghi", "empty": ""} {
		if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: err = %v, want ErrInvalidToken", name, err)
		}
	}
}

func TestAdminHasEveryRole(t *testing.T) {
	t.Parallel()
	if !(Principal{Roles: []string{RoleAdmin}}).HasRole(RoleUser) {
		t.Fatal("admin lacks user role")
	}
}

func TestEnsureKeyPairIsStable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k1, created, err := EnsureKeyPair(dir)
	if err != nil || !created {
		t.Fatalf("first: created=%v err=%v", created, err)
	}
	k2, created, err := EnsureKeyPair(dir)
	if err != nil || created || !k1.Equal(k2) {
		t.Fatalf("second: created=%v err=%v same=%v", created, err, k1.Equal(k2))
	}
	st, err := os.Stat(filepath.Join(dir, PrivateKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode = %v, %v", st.Mode(), err)
	}
	pub, err := LoadPublicKey(filepath.Join(dir, PublicKeyFile))
	if err != nil || !pub.Equal(k1.Public()) {
		t.Fatalf("public key mismatch: %v", err)
	}
	if _, err := LoadPublicKey(filepath.Join(dir, PrivateKeyFile)); err == nil {
		t.Fatal("private key accepted as public")
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	tok, _, _ := NewSigner(priv).Issue("u1", []string{RoleUser}, time.Hour)
	a := NewAuthenticator(NewVerifier(pub), "/thefold.gateway.v1.AuthService/RequestLoginCode")
	in := func(v ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(v...))
	}
	cases := []struct {
		name     string
		ctx      context.Context
		method   string
		wantCode codes.Code
		wantUser string
	}{
		{"valid", in("authorization", "Bearer "+tok), "/thefold.tasks.v1.TaskService/GetTask", codes.OK, "u1"},
		{"lowercase scheme", in("authorization", "bearer "+tok), "/thefold.tasks.v1.TaskService/GetTask", codes.OK, "u1"},
		{"missing", context.Background(), "/thefold.tasks.v1.TaskService/GetTask", codes.Unauthenticated, ""},
		{"wrong scheme", in("authorization", "Basic "+tok), "/thefold.tasks.v1.TaskService/GetTask", codes.Unauthenticated, ""},
		{"bad token", in("authorization", "Bearer nope"), "/thefold.tasks.v1.TaskService/GetTask", codes.Unauthenticated, ""},
		{"health is public", context.Background(), "/grpc.health.v1.Health/Check", codes.OK, ""},
		{"declared public", context.Background(), "/thefold.gateway.v1.AuthService/RequestLoginCode", codes.OK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, err := a.Authenticate(tc.ctx, tc.method)
			if status.Code(err) != tc.wantCode {
				t.Fatalf("code = %v (%v), want %v", status.Code(err), err, tc.wantCode)
			}
			if err != nil {
				return
			}
			p, ok := FromContext(ctx)
			if tc.wantUser == "" {
				if ok {
					t.Fatalf("unexpected principal %+v", p)
				}
				return
			}
			if p.UserID != tc.wantUser {
				t.Fatalf("user = %q", p.UserID)
			}
			out := OutgoingContext(ctx)
			md, _ := metadata.FromOutgoingContext(out)
			if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+tok {
				t.Fatalf("forwarded authorization = %v", got)
			}
		})
	}
}

// BenchmarkVerify shows what the verification cache saves on every hop of a request.
func BenchmarkVerify(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	tok, _, _ := NewSigner(priv).Issue("u1", []string{RoleUser}, time.Hour)
	b.Run("signature", func(b *testing.B) {
		v := NewVerifier(pub)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		v := NewVerifier(pub)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(tok); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestVerifyCacheNeverOutlivesTheToken(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	start := time.Now().Truncate(time.Second) // tokens carry whole seconds
	now := start
	clock := WithClock(func() time.Time { return now })
	s := NewSigner(priv, clock)
	v := NewVerifier(pub, clock)

	tok, _, _ := s.Issue("u1", nil, 10*time.Second)
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	now = start.Add(5 * time.Second) // cached and valid
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("within lifetime: %v", err)
	}
	now = start.Add(10*time.Second + 31*time.Second) // past expiry and leeway
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("expired token served from cache: %v", err)
	}
	// A forged token never enters the cache, however often it is tried.
	_, other := newKeys(t)
	forged, _, _ := NewSigner(other).Issue("u1", []string{RoleAdmin}, time.Hour)
	for range 2 {
		if _, err := v.Verify(forged); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("forged token accepted: %v", err)
		}
	}
}
