package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testClock is a clock tests move by hand; safe to read from server goroutines.
type testClock struct{ ns atomic.Int64 }

func newTestClock(t time.Time) *testClock {
	c := &testClock{}
	c.Set(t)
	return c
}

func (c *testClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *testClock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func (c *testClock) Option() Option      { return WithClock(c.Now) }

func headerKID(t *testing.T, tok string) (string, bool) {
	t.Helper()
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, &Claims{})
	if err != nil {
		t.Fatal(err)
	}
	kid, ok := parsed.Header["kid"].(string)
	return kid, ok
}

func wantRefused(t *testing.T, v *Verifier, tok, why string) {
	t.Helper()
	_, err := v.Verify(tok)
	if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), why) {
		t.Fatalf("err = %v, want ErrInvalidToken mentioning %q", err, why)
	}
}

func TestTokensNameTheirKey(t *testing.T) {
	t.Parallel()
	pub, priv := newKeys(t)
	agentPub, agentPriv := newKeys(t)
	if id := KeyID(pub); len(id) != 16 || id == KeyID(agentPub) {
		t.Fatalf("KeyID = %q (other key %q)", id, KeyID(agentPub))
	}
	tok, _, err := NewSigner(priv).Issue("u1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if kid, ok := headerKID(t, tok); !ok || kid != KeyID(pub) {
		t.Fatalf("user token kid = %q, want %q", kid, KeyID(pub))
	}
	agent, _ := NewServiceSigner("agent", agentPriv)
	stok, _, err := agent.Issue("u1")
	if err != nil {
		t.Fatal(err)
	}
	if kid, ok := headerKID(t, stok); !ok || kid != KeyID(agentPub) {
		t.Fatalf("service token kid = %q, want %q", kid, KeyID(agentPub))
	}
}

func TestVerifierKeysByKID(t *testing.T) {
	t.Parallel()
	curPub, curPriv := newKeys(t)
	oldPub, oldPriv := newKeys(t)
	_, strayPriv := newKeys(t)
	start := time.Now().Truncate(time.Second)
	clock := newTestClock(start)
	retiredAt := start.Add(time.Hour)
	v := NewVerifierKeys([]VerifyKey{{Key: curPub}, {Key: oldPub, NotAfter: retiredAt}}, clock.Option())

	cur, _, _ := NewSigner(curPriv, clock.Option()).Issue("u1", nil, 3*time.Hour)
	old, _, _ := NewSigner(oldPriv, clock.Option()).Issue("u2", nil, 3*time.Hour)
	stray, _, _ := NewSigner(strayPriv, clock.Option()).Issue("u3", nil, 3*time.Hour)
	for tok, user := range map[string]string{cur: "u1", old: "u2"} {
		if p, err := v.Verify(tok); err != nil || p.UserID != user {
			t.Fatalf("%s: %+v, %v", user, p, err)
		}
	}
	wantRefused(t, v, stray, "unknown signing key")

	// A token naming a known key but signed by another fails on the signature.
	forged := jwt.NewWithClaims(jwt.SigningMethodEdDSA, userClaims(start, nil))
	forged.Header["kid"] = KeyID(oldPub)
	forgedTok, err := forged.SignedString(strayPriv)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, v, forgedTok, "signature is invalid")

	// Without a kid (tokens issued before kids existed): the current key, and only it.
	if p, err := v.Verify(craft(t, jwt.SigningMethodEdDSA, curPriv, userClaims(start, nil))); err != nil || p.UserID != "u1" {
		t.Fatalf("kid-less token of the current key: %+v, %v", p, err)
	}
	wantRefused(t, v, craft(t, jwt.SigningMethodEdDSA, oldPriv, userClaims(start, nil)), "signature is invalid")

	// The retired key verifies until its NotAfter (the second check is a cache hit), then
	// nothing, even a token that has not expired.
	clock.Set(retiredAt.Add(-time.Second))
	for range 2 {
		if _, err := v.Verify(old); err != nil {
			t.Fatalf("retired key before its Not-After: %v", err)
		}
	}
	clock.Set(retiredAt.Add(time.Minute + time.Second)) // past the cache, within the token's life
	wantRefused(t, v, old, "retired")
	if _, err := v.Verify(cur); err != nil {
		t.Fatalf("current key after the retirement: %v", err)
	}

	// SetKeys replaces the keys and drops cached verifications: a removed key is refused
	// at once, a token of a new current key accepted.
	v.SetKeys([]VerifyKey{{Key: oldPub}})
	wantRefused(t, v, cur, "unknown signing key")
	if _, err := v.Verify(old); err != nil {
		t.Fatalf("old key made current again: %v", err)
	}
}

func writePubFile(t *testing.T, path string, blocks ...*pem.Block) {
	t.Helper()
	var out []byte
	for _, b := range blocks {
		out = append(out, pem.EncodeToMemory(b)...)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func pubBlock(t *testing.T, pub any, notAfter string) *pem.Block {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	b := &pem.Block{Type: "PUBLIC KEY", Bytes: der}
	if notAfter != "" {
		b.Headers = map[string]string{NotAfterHeader: notAfter}
	}
	return b
}

func TestRotateKeyPair(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pubPath := filepath.Join(dir, PublicKeyFile)
	key0, _, err := EnsureKeyPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Truncate(time.Second)
	clock := newTestClock(start)
	const maxLife = time.Hour
	issue := func(key ed25519.PrivateKey, user string) string {
		t.Helper()
		tok, _, err := NewSigner(key, clock.Option(), WithMaxLifetime(maxLife)).Issue(user, nil, maxLife)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	verifier := func() *Verifier {
		t.Helper()
		keys, err := LoadVerifyKeys(pubPath)
		if err != nil {
			t.Fatal(err)
		}
		return NewVerifierKeys(keys, clock.Option(), WithMaxLifetime(maxLife))
	}
	tok0 := issue(key0, "u0")

	// First rotation: the new key first, the old one retired after every token it signed
	// has expired.
	kid1, err := RotateKeyPair(dir, maxLife, start)
	if err != nil {
		t.Fatal(err)
	}
	key1, err := LoadPrivateKey(filepath.Join(dir, PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pub0, pub1 := key0.Public().(ed25519.PublicKey), key1.Public().(ed25519.PublicKey)
	if key1.Equal(key0) || kid1 != KeyID(pub1) {
		t.Fatalf("rotation kept the key or misnamed it: kid %q, want %q", kid1, KeyID(pub1))
	}
	raw, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []*pem.Block
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	wantNotAfter := start.Add(maxLife + leeway).UTC().Format(time.RFC3339)
	if len(blocks) != 2 || len(blocks[0].Headers) != 0 || blocks[1].Headers[NotAfterHeader] != wantNotAfter {
		t.Fatalf("public key file after one rotation:\n%s\nwant 2 blocks, the second with %s: %s", raw, NotAfterHeader, wantNotAfter)
	}
	keys, err := LoadVerifyKeys(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !keys[0].Key.Equal(pub1) || !keys[0].NotAfter.IsZero() || !keys[1].Key.Equal(pub0) ||
		!keys[1].NotAfter.Equal(start.Add(maxLife+leeway)) {
		t.Fatalf("keys = %+v", keys)
	}
	if st, err := os.Stat(filepath.Join(dir, PrivateKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key after rotation: %v, %v", st.Mode(), err)
	}
	v := verifier()
	tok1 := issue(key1, "u1")
	for tok, user := range map[string]string{tok0: "u0", tok1: "u1"} {
		if p, err := v.Verify(tok); err != nil || p.UserID != user {
			t.Fatalf("after the first rotation, %s: %+v, %v", user, p, err)
		}
	}

	// Second rotation, while key0 is still in its grace period: kept.
	clock.Set(start.Add(30 * time.Minute))
	kid2, err := RotateKeyPair(dir, maxLife, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if keys, err = LoadVerifyKeys(pubPath); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || KeyID(keys[0].Key) != kid2 || !keys[1].Key.Equal(pub1) || !keys[2].Key.Equal(pub0) ||
		!keys[1].NotAfter.Equal(clock.Now().Add(maxLife+leeway)) || !keys[2].NotAfter.Equal(start.Add(maxLife+leeway)) {
		t.Fatalf("after the second rotation: %+v", keys)
	}
	v = verifier()
	for tok, user := range map[string]string{tok0: "u0", tok1: "u1"} {
		if p, err := v.Verify(tok); err != nil || p.UserID != user {
			t.Fatalf("after the second rotation, %s: %+v, %v", user, p, err)
		}
	}

	// Third rotation, after key0's Not-After: dropped; key1 is still kept.
	clock.Set(start.Add(maxLife + leeway + time.Minute))
	if _, err := RotateKeyPair(dir, maxLife, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if keys, err = LoadVerifyKeys(pubPath); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || KeyID(keys[1].Key) != kid2 || !keys[2].Key.Equal(pub1) {
		t.Fatalf("after the third rotation: %+v", keys)
	}
	for _, k := range keys {
		if k.Key.Equal(pub0) {
			t.Fatal("a key past its Not-After was kept")
		}
	}
	key3, _ := LoadPrivateKey(filepath.Join(dir, PrivateKeyFile))
	if p, err := verifier().Verify(issue(key3, "u3")); err != nil || p.UserID != "u3" {
		t.Fatalf("newest key: %+v, %v", p, err)
	}

	// Config.NewVerifier reads every key of the file.
	cv, err := (Config{PublicKeyFile: pubPath, MaxTokenLifetime: maxLife}).NewVerifier()
	if err != nil {
		t.Fatal(err)
	}
	real1, _, _ := NewSigner(key1).Issue("u1", nil, time.Minute)
	if _, err := cv.Verify(real1); err != nil {
		t.Fatalf("Config.NewVerifier refuses a retired key still in its grace period: %v", err)
	}

	if _, err := RotateKeyPair(t.TempDir(), maxLife, start); err == nil {
		t.Fatal("rotated a directory without a key pair")
	}
}

func TestLoadVerifyKeysRejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pub, _ := newKeys(t)
	old, _ := newKeys(t)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	ok := filepath.Join(dir, "ok.pem")
	// Blocks of other types are skipped.
	writePubFile(t, ok, &pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}, pubBlock(t, pub, ""), pubBlock(t, old, later))
	keys, err := LoadVerifyKeys(ok)
	if err != nil || len(keys) != 2 || !keys[0].Key.Equal(pub) || keys[1].NotAfter.Format(time.RFC3339) != later {
		t.Fatalf("valid file: %+v, %v", keys, err)
	}

	cases := map[string]struct {
		blocks []*pem.Block
		raw    string
		want   string
	}{
		"first key retired":  {blocks: []*pem.Block{pubBlock(t, old, later), pubBlock(t, pub, "")}, want: "the first key is the current one"},
		"bad Not-After":      {blocks: []*pem.Block{pubBlock(t, pub, ""), pubBlock(t, old, "tomorrow")}, want: NotAfterHeader},
		"not Ed25519":        {blocks: []*pem.Block{pubBlock(t, &ecKey.PublicKey, "")}, want: "not an Ed25519 key"},
		"not a key":          {blocks: []*pem.Block{{Type: "PUBLIC KEY", Bytes: []byte("garbage")}}, want: "auth:"},
		"garbage":            {raw: "this is not PEM at all\n", want: "no PUBLIC KEY PEM block"},
		"empty":              {raw: "", want: "no PUBLIC KEY PEM block"},
		"only a private key": {blocks: []*pem.Block{{Type: "PRIVATE KEY", Bytes: []byte("x")}}, want: "no PUBLIC KEY PEM block"},
		"retired key only":   {blocks: []*pem.Block{pubBlock(t, old, later)}, want: "the first key is the current one"},
		"the same key twice": {blocks: []*pem.Block{pubBlock(t, pub, ""), pubBlock(t, pub, "")}},
	}
	for name, tc := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".pem")
		if tc.blocks != nil {
			writePubFile(t, path, tc.blocks...)
		} else if err := os.WriteFile(path, []byte(tc.raw), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadVerifyKeys(path)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", name, err, tc.want)
		}
	}
	if _, err := LoadVerifyKeys(filepath.Join(dir, "missing.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWatchKeyFileReloadsOnRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pubPath := filepath.Join(dir, PublicKeyFile)
	key0, _, err := EnsureKeyPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadVerifyKeys(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifierKeys(keys)
	tok0, _, _ := NewSigner(key0).Issue("u0", nil, time.Hour)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchKeyFile(ctx, pubPath, v, slog.New(slog.DiscardHandler)) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("WatchKeyFile: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("WatchKeyFile did not return when its context ended")
		}
	}()
	// WatchKeyFile notes the file's state when it starts; let it do so before the rotation.
	time.Sleep(200 * time.Millisecond)

	if _, err := RotateKeyPair(dir, time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	key1, _ := LoadPrivateKey(filepath.Join(dir, PrivateKeyFile))
	tok1, _, _ := NewSigner(key1).Issue("u1", nil, time.Hour)
	if _, err := v.Verify(tok1); err == nil {
		t.Fatal("new key accepted before any reload")
	}
	waitAccepted := func(tok string) {
		t.Helper()
		deadline := time.Now().Add(3*keyFilePoll + 2*time.Second)
		for {
			_, err := v.Verify(tok)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the verifier did not pick up the rotated key file: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitAccepted(tok1)
	if _, err := v.Verify(tok0); err != nil {
		t.Fatalf("the retired key's token after the reload: %v", err)
	}

	// A file that does not load leaves the keys as they were.
	if err := os.WriteFile(pubPath, []byte("not a key\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(keyFilePoll + keyFilePoll/2)
	for _, tok := range []string{tok0, tok1} {
		if _, err := v.Verify(tok); err != nil {
			t.Fatalf("a broken key file changed the keys: %v", err)
		}
	}
	// And once it is fixed, it is read again (the broken state was not taken as seen).
	if _, err := RotateKeyPair(dir, time.Hour, time.Now()); err == nil {
		t.Fatal("rotated over a broken public key file")
	}
	writePubFile(t, pubPath, pubBlock(t, key1.Public(), ""))
	deadline := time.Now().Add(3*keyFilePoll + 2*time.Second)
	for {
		if _, err := v.Verify(tok0); err != nil {
			break // key0 is gone: the fixed file was loaded
		}
		if time.Now().After(deadline) {
			t.Fatal("the fixed key file was not reloaded")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantRefused(t, v, tok0, "unknown signing key")
	waitAccepted(tok1)
}

// TestSetKeysDuringAVerification: a token verified under a key that SetKeys removes before
// the verification is cached is not cached, so the next Verify refuses it at once.
func TestSetKeysDuringAVerification(t *testing.T) {
	oldPub, oldPriv := newKeys(t)
	newPub, _ := newKeys(t)
	v := NewVerifierKeys([]VerifyKey{{Key: oldPub}})
	tok, _, err := NewSigner(oldPriv).Issue("u1", nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	testHookBeforeCache = func() {
		testHookBeforeCache = nil
		v.SetKeys([]VerifyKey{{Key: newPub}}) // the old key is removed, not retired
	}
	t.Cleanup(func() { testHookBeforeCache = nil })
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("verification under the old key: %v", err) // it began before the swap
	}
	wantRefused(t, v, tok, "")
}
