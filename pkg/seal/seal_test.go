package seal

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestSealOpen(t *testing.T) {
	key, err := LoadKeyFile(filepath.Join(t.TempDir(), "k", "secret.key"), true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := b.Seal("ghp_secret")
	s2, _ := b.Seal("ghp_secret")
	if string(s1) == string(s2) || strings.Contains(string(s1), "ghp_secret") {
		t.Fatal("sealing must use a fresh nonce and hide the plaintext")
	}
	if got, err := b.Open(s1); err != nil || got != "ghp_secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	s1[len(s1)-1] ^= 1
	if _, err := b.Open(s1); err == nil {
		t.Fatal("an altered secret opened")
	}
	other, _ := New(make([]byte, KeySize))
	if _, err := other.Open(s2); err == nil {
		t.Fatal("another key opened the secret")
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a short key was accepted")
	}
}

func TestKeyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d", "secret.key")
	if _, err := LoadKeyFile(p, false); err == nil {
		t.Fatal("a missing key file without create was accepted")
	}
	k1, err := LoadKeyFile(p, true)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	dir, _ := os.Stat(filepath.Dir(p))
	if st.Mode().Perm() != 0o600 || dir.Mode().Perm() != 0o700 {
		t.Fatalf("modes: file %v dir %v", st.Mode().Perm(), dir.Mode().Perm())
	}
	k2, err := LoadKeyFile(p, true)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("reloading gave another key: %v", err)
	}
	os.WriteFile(p, []byte("nothex"), 0o600)
	if _, err := LoadKeyFile(p, false); err == nil {
		t.Fatal("a malformed key file was accepted")
	}
}

// Processes starting at once (replicas of a service) that each create the key file if it
// is missing all get the one key, and none reads the file before it is whole.
func TestKeyFileCreatedConcurrently(t *testing.T) {
	for round := range 20 {
		p := filepath.Join(t.TempDir(), "d", "secret.key")
		keys := make([][]byte, 8)
		errs := make([]error, len(keys))
		var wg sync.WaitGroup
		for i := range keys {
			wg.Go(func() { keys[i], errs[i] = LoadKeyFile(p, true) })
		}
		wg.Wait()
		for i := range keys {
			if errs[i] != nil {
				t.Fatalf("round %d: %v", round, errs[i])
			}
			if string(keys[i]) != string(keys[0]) {
				t.Fatalf("round %d: two keys", round)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".key-*")); len(left) > 0 {
			t.Fatalf("round %d: temporary files left: %v", round, left)
		}
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("round %d: %v %v", round, st, err)
		}
	}
}
