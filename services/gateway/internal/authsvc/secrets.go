package authsvc

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"

	"github.com/thefold/thefold/pkg/seal"
)

// Secret prefixes: a refresh token and an API key are told apart (and from a JWT) by them.
const (
	refreshPrefix = "tfr_"
	secretBytes   = 32
	// keyPrefixLen is how much of an API key is kept in clear to recognise it.
	keyPrefixLen = 12
)

// Secrets derives the gateway's keyed hashes and encryption from one server secret (the
// user-token signing key's seed): login codes are stored as HMACs, a refresh token's
// successor is an HMAC of it, and an API key's secret is held encrypted for the window in
// which a retried CreateAPIKey may show it again.
type Secrets struct {
	codeKey, refreshKey []byte
	box                 *seal.Box
}

// NewSecrets derives the keys from the signing key.
func NewSecrets(signingKey ed25519.PrivateKey) (*Secrets, error) {
	if len(signingKey) != ed25519.PrivateKeySize {
		return nil, errors.New("authsvc: no Ed25519 signing key")
	}
	derive := func(purpose string) []byte {
		m := hmac.New(sha256.New, signingKey.Seed())
		m.Write([]byte("thefold gateway: " + purpose))
		return m.Sum(nil)
	}
	box, err := seal.New(derive("api key secrets"))
	if err != nil {
		return nil, err
	}
	return &Secrets{codeKey: derive("login codes"), refreshKey: derive("refresh tokens"), box: box}, nil
}

// codeHash is what is stored of a login code: bound to its user, so a code is no use for
// another account.
func (s *Secrets) codeHash(userID, code string) []byte {
	m := hmac.New(sha256.New, s.codeKey)
	m.Write([]byte(userID + "\x00" + code))
	return m.Sum(nil)
}

// successor is the refresh token that follows tok: derived, so a retry gets the same one.
func (s *Secrets) successor(tok string) string {
	m := hmac.New(sha256.New, s.refreshKey)
	m.Write([]byte(tok))
	return refreshPrefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Secrets) seal(plain string) ([]byte, error) { return s.box.Seal(plain) }

func (s *Secrets) open(sealed []byte) (string, error) { return s.box.Open(sealed) }

// newSecret returns prefix + 32 random bytes, base64url.
func newSecret(prefix string) (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// hashSecret is what is stored of a high-entropy secret (refresh token, API key).
func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// newCode returns a uniformly random 6-digit code.
func newCode() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return fmt.Sprintf("%06d", n.Int64()), nil
}
