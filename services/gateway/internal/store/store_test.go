package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	"github.com/thefold/thefold/services/gateway/migrations"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "gateway", migrations.FS)
	return New(pool)
}

func hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func addUser(t *testing.T, s *Store, email, role string) User {
	t.Helper()
	u, err := s.CreateUser(t.Context(), uuid.NewString(), email, email, "name", role)
	if err != nil {
		t.Fatalf("CreateUser(%s): %v", email, err)
	}
	return u
}

func TestLockFor(t *testing.T) {
	t.Parallel()
	p := LockoutPolicy{MaxFailures: 5, Base: time.Minute, Max: time.Hour}
	for n, want := range map[int]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 6: 32 * time.Minute,
		7: time.Hour, 40: time.Hour, 1000: time.Hour} {
		if got := p.lockFor(n); got != want {
			t.Errorf("lockFor(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestSpendRefreshGrace: a spent token returns its successor within the grace period
// only; after it, the reuse ends the session and revokes it.
func TestSpendRefreshGrace(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	u := addUser(t, s, "a@example.com", RoleMember)
	sid, err := s.CreateSession(ctx, u.ID, time.Now().Add(time.Hour), hash("r1"))
	if err != nil {
		t.Fatal(err)
	}
	const grace = 30 * time.Second
	until := time.Now().Add(time.Hour)
	r, res, err := s.SpendRefresh(ctx, hash("r1"), hash("r2"), grace, until)
	if err != nil || res != Spent || r.SessionID != sid || r.UserID != u.ID {
		t.Fatalf("SpendRefresh = %+v, %v, %v; want Spent in session %s", r, res, err, sid)
	}
	if _, res, err = s.SpendRefresh(ctx, hash("r1"), hash("r2"), grace, until); err != nil || res != Retried {
		t.Fatalf("SpendRefresh again = %v, %v; want Retried", res, err)
	}
	// Past the grace period, the same retry is a theft.
	s.now = func() time.Time { return time.Now().Add(grace + time.Second) }
	if _, res, err = s.SpendRefresh(ctx, hash("r1"), hash("r2"), grace, until); err != nil || res != Reused {
		t.Fatalf("SpendRefresh after the grace period = %v, %v; want Reused", res, err)
	}
	s.now = time.Now
	// The session is over: its successor is dead too, and the session's revocation is in force.
	if _, res, err = s.SpendRefresh(ctx, hash("r2"), hash("r3"), grace, until); err != nil || res != Dead {
		t.Errorf("SpendRefresh of the successor = %v, %v; want Dead", res, err)
	}
	if _, res, err = s.SpendRefresh(ctx, hash("unknown"), hash("x"), grace, until); err != nil || res != Dead {
		t.Errorf("SpendRefresh of an unknown token = %v, %v; want Dead", res, err)
	}
	revs, cursor, err := s.RevocationsInForce(ctx)
	if err != nil || len(revs) != 1 || revs[0].Type != RevokeSession || revs[0].Subject != sid || revs[0].EventID != cursor {
		t.Errorf("RevocationsInForce = %+v, %d, %v; want the session's", revs, cursor, err)
	}
	// Ending an ended session again revokes nothing more.
	if err := s.EndSessionByRefresh(ctx, hash("r2"), until); err != nil {
		t.Fatal(err)
	}
	if revs, _, _ := s.RevocationsInForce(ctx); len(revs) != 1 {
		t.Errorf("after ending twice: %d revocations, want 1", len(revs))
	}
	if err := s.EndSessionByRefresh(ctx, hash("unknown"), until); !errors.Is(err, ErrNotFound) {
		t.Errorf("EndSessionByRefresh(unknown) = %v, want ErrNotFound", err)
	}
}

// TestSpendRefreshExpired: an expired refresh token or session is dead.
func TestSpendRefreshExpired(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	u := addUser(t, s, "a@example.com", RoleMember)
	if _, err := s.CreateSession(ctx, u.ID, time.Now().Add(time.Minute), hash("r1")); err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, res, err := s.SpendRefresh(ctx, hash("r1"), hash("r2"), time.Second, time.Now().Add(time.Hour)); err != nil || res != Dead {
		t.Errorf("SpendRefresh of an expired token = %v, %v; want Dead", res, err)
	}
}

// TestLastAdminConcurrently: two admins disabling each other at once leave one enabled.
func TestLastAdminConcurrently(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := addUser(t, s, "a@example.com", RoleAdmin)
	b := addUser(t, s, "b@example.com", RoleAdmin)
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, u := range []User{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.UpdateUser(context.Background(), u.ID, func(u *User) error { u.Disabled = true; return nil },
					time.Now().Add(time.Second), time.Now().Add(time.Hour))
			}()
		}
		wg.Wait()
		failed := 0
		for _, err := range errs {
			switch {
			case errors.Is(err, ErrLastAdmin):
				failed++
			case err != nil:
				t.Fatal(err)
			}
		}
		if failed != 1 {
			t.Fatalf("round %d: %d of 2 refused, want exactly 1", round, failed)
		}
		for _, u := range []User{a, b} {
			if _, err := s.UpdateUser(t.Context(), u.ID, func(u *User) error { u.Disabled = false; return nil }, time.Now(), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestUpdateUserRevokes: only disabling and a role change cut the user's tokens.
func TestUpdateUserRevokes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	addUser(t, s, "admin@example.com", RoleAdmin)
	u := addUser(t, s, "m@example.com", RoleMember)
	nb := time.Now().Add(time.Second).Truncate(time.Microsecond)
	count := func() int {
		revs, _, err := s.RevocationsInForce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(revs)
	}
	for _, c := range []struct {
		name   string
		change func(*User)
		cut    bool
	}{
		{"rename", func(u *User) { u.DisplayName = "New" }, false},
		{"disable", func(u *User) { u.Disabled = true }, true},
		{"disable again", func(u *User) { u.Disabled = true }, false},
		{"enable", func(u *User) { u.Disabled = false }, false},
		{"promote", func(u *User) { u.Role = RoleAdmin }, true},
	} {
		before := count()
		got, err := s.UpdateUser(ctx, u.ID, func(u *User) error { c.change(u); return nil }, nb, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cut := count() > before; cut != c.cut {
			t.Errorf("%s: revoked %v, want %v", c.name, cut, c.cut)
		}
		if c.cut && !got.TokensNotBefore.Equal(nb) {
			t.Errorf("%s: tokens_not_before %v, want %v", c.name, got.TokensNotBefore, nb)
		}
	}
	if _, err := s.UpdateUser(ctx, uuid.NewString(), func(*User) error { return nil }, nb, nb); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateUser(unknown) = %v, want ErrNotFound", err)
	}
}

// TestRevocationsInForce: expired revocations are left out; each one is an outbox event
// that decodes back to it.
func TestRevocationsInForce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	nb := time.Now().Truncate(time.Second)
	for _, r := range []Revocation{
		{Type: RevokeToken, Subject: "gone", Expire: time.Now().Add(-time.Second)},
		{Type: RevokeToken, Subject: "t1", Expire: time.Now().Add(time.Hour)},
		{Type: RevokeUser, Subject: "u1", NotBefore: nb, Expire: time.Now().Add(time.Hour)},
	} {
		if err := s.Revoke(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	revs, cursor, err := s.RevocationsInForce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 2 || revs[0].Subject != "t1" || revs[1].Subject != "u1" || !revs[1].NotBefore.Equal(nb) || !revs[0].NotBefore.IsZero() ||
		revs[0].EventID >= revs[1].EventID || revs[1].EventID != cursor {
		t.Fatalf("RevocationsInForce = %+v, %d", revs, cursor)
	}
	if latest, err := s.LatestEventID(ctx); err != nil || latest != cursor {
		t.Errorf("LatestEventID = %d, %v; want %d", latest, err, cursor)
	}
	// The outbox holds the same, readable by a watcher.
	hub := events.NewHub(s.Pool())
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Run(hctx) }()
	defer func() { cancel(); <-done }()
	var got []Revocation
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	_ = hub.Watch(wctx, 0, RevocationFilter, func(e events.Event) error {
		r, ok := RevocationFromEvent(e)
		if !ok {
			t.Errorf("event %+v is not a revocation", e)
		}
		got = append(got, r)
		if len(got) == 3 {
			wcancel()
		}
		return nil
	})
	if len(got) != 3 || got[0].Subject != "gone" || got[2].Type != RevokeUser || !got[2].NotBefore.Equal(nb) || got[1].EventID != revs[0].EventID {
		t.Errorf("outbox revocations = %+v", got)
	}
	// Housekeeping drops the expired one.
	if err := s.Prune(ctx, time.Hour, time.Minute); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM revocations`).Scan(&n); err != nil || n != 2 {
		t.Errorf("revocations after Prune: %d, %v; want 2", n, err)
	}
}

// TestCreateAPIKeyIdempotent: a request id is per user.
func TestCreateAPIKeyIdempotent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	a := addUser(t, s, "a@example.com", RoleMember)
	b := addUser(t, s, "b@example.com", RoleMember)
	k := APIKey{UserID: a.ID, Name: "ci", Prefix: "tfk_1", Scopes: []string{"*:write"}, RequestID: "r", SecretEnc: []byte("sealed")}
	first, created, err := s.CreateAPIKey(ctx, k, hash("k1"))
	if err != nil || !created {
		t.Fatalf("CreateAPIKey = %v, %v", created, err)
	}
	again, created, err := s.CreateAPIKey(ctx, APIKey{UserID: a.ID, Name: "other", Prefix: "tfk_2", Scopes: []string{"tasks:read"}, RequestID: "r"}, hash("k2"))
	if err != nil || created || again.ID != first.ID || again.Name != "ci" || !bytes.Equal(again.SecretEnc, []byte("sealed")) {
		t.Errorf("CreateAPIKey retried = %+v, %v, %v; want the first key", again, created, err)
	}
	if _, err := s.KeyByHash(ctx, hash("k2")); !errors.Is(err, ErrNotFound) {
		t.Errorf("the retry stored its secret: %v", err)
	}
	k.UserID = b.ID
	theirs, created, err := s.CreateAPIKey(ctx, k, hash("k3"))
	if err != nil || !created || theirs.ID == first.ID {
		t.Errorf("another user's CreateAPIKey = %+v, %v, %v; want a new key", theirs, created, err)
	}
	// Revoking drops the held secret and is idempotent.
	r1, err := s.RevokeAPIKey(ctx, a.ID, first.ID, time.Now().Add(time.Hour))
	if err != nil || r1.RevokeTime.IsZero() || r1.SecretEnc != nil {
		t.Fatalf("RevokeAPIKey = %+v, %v", r1, err)
	}
	r2, err := s.RevokeAPIKey(ctx, a.ID, first.ID, time.Now().Add(time.Hour))
	if err != nil || !r2.RevokeTime.Equal(r1.RevokeTime) {
		t.Errorf("RevokeAPIKey again = %+v, %v", r2, err)
	}
	if revs, _, _ := s.RevocationsInForce(ctx); len(revs) != 1 || revs[0].Subject != first.ID {
		t.Errorf("revocations = %+v, want the key's once", revs)
	}
	if _, err := s.RevokeAPIKey(ctx, b.ID, first.ID, time.Now()); !errors.Is(err, ErrNotFound) {
		t.Errorf("RevokeAPIKey of another user's key = %v, want ErrNotFound", err)
	}
}

// Gateway replicas starting at once each ensure the first admin: every one succeeds, one
// user is made; an address another user holds is still refused.
func TestEnsureUserConcurrently(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for round := range 20 { // the race is narrow: many rounds, each on a fresh id and address
		id, email := uuid.NewString(), uuid.NewString()+"@example.com"
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() { errs <- s.EnsureUser(ctx, id, email, email, "admin", RoleAdmin) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: EnsureUser: %v", round, err)
			}
		}
	}
	taken := addUser(t, s, "taken@example.com", RoleMember)
	if err := s.EnsureUser(ctx, uuid.NewString(), taken.Email, taken.Email, "x", RoleAdmin); !errors.Is(err, ErrExists) {
		t.Fatalf("EnsureUser with another user's address: %v, want ErrExists", err)
	}
}
