package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Key file names inside a key directory.
const (
	PrivateKeyFile = "signing-key.pem"
	PublicKeyFile  = "signing-key.pub.pem"
	// ServiceKeysDir holds the public key of each service identity, <service>.pub.pem;
	// every verifier reads it (THEFOLD_AUTH_SERVICE_KEYS_DIR).
	ServiceKeysDir = "service-keys"
	// ServicePrivateDir holds each service's private key, <service>.pem; only that
	// service is given its file (THEFOLD_AUTH_SERVICE_KEY_FILE).
	ServicePrivateDir = "service-private"
)

const servicePublicSuffix = ".pub.pem"

// EnsureKeyPair loads the user-token key pair from dir, creating it (mode 0600 for the
// private key) when absent. created reports whether a new pair was written.
func EnsureKeyPair(dir string) (priv ed25519.PrivateKey, created bool, err error) {
	// The directory is world-readable so services in containers (another uid) can read the
	// public key; the private key file itself is 0600.
	return ensureKeyPair(filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, PublicKeyFile), 0o755)
}

// EnsureServiceKeyPair loads service's key pair from the key directory dir, creating it
// when absent: the private key under service-private/ (0700 directory, 0600 file), the
// public key under service-keys/.
func EnsureServiceKeyPair(dir, service string) (priv ed25519.PrivateKey, created bool, err error) {
	if !validServiceName.MatchString(service) {
		return nil, false, fmt.Errorf("auth: service name %q: want lower-case letters, digits and dashes", service)
	}
	if err := os.MkdirAll(filepath.Join(dir, ServiceKeysDir), 0o755); err != nil {
		return nil, false, fmt.Errorf("auth: %w", err)
	}
	return ensureKeyPair(ServicePrivateKeyPath(dir, service), filepath.Join(dir, ServiceKeysDir, service+servicePublicSuffix), 0o700)
}

// ServicePrivateKeyPath is where EnsureServiceKeyPair keeps service's private key.
func ServicePrivateKeyPath(dir, service string) string {
	return filepath.Join(dir, ServicePrivateDir, service+".pem")
}

// LoadServicePublicKeys reads every <service>.pub.pem in dir.
func LoadServicePublicKeys(dir string) (map[string]ed25519.PublicKey, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("auth: service keys: %w", err)
	}
	keys := map[string]ed25519.PublicKey{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), servicePublicSuffix)
		if !ok || e.IsDir() {
			continue
		}
		if !validServiceName.MatchString(name) {
			return nil, fmt.Errorf("auth: service keys: %s: not a service name", e.Name())
		}
		if keys[name], err = LoadPublicKey(filepath.Join(dir, e.Name())); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// ensureKeyPair loads the private key at privPath or creates the pair; the private key's
// directory is created with dirMode.
func ensureKeyPair(privPath, pubPath string, dirMode os.FileMode) (ed25519.PrivateKey, bool, error) {
	if priv, err := LoadPrivateKey(privPath); err == nil {
		return priv, false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(privPath), dirMode); err != nil {
		return nil, false, fmt.Errorf("auth: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("auth: generate key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, fmt.Errorf("auth: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, false, fmt.Errorf("auth: %w", err)
	}
	// Public key first: a private key on disk always has its public half beside it.
	if err := writeFileAtomic(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return nil, false, err
	}
	if err := writeFileAtomic(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return nil, false, err
	}
	return priv, true, nil
}

// LoadPrivateKey reads a PEM PKCS#8 Ed25519 private key.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("auth: %s: not an Ed25519 key", path)
	}
	return priv, nil
}

// LoadPublicKey reads a PEM PKIX Ed25519 public key.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("auth: %s: not an Ed25519 key", path)
	}
	return pub, nil
}

func readPEM(path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != typ {
		return nil, fmt.Errorf("auth: %s: no %s PEM block", path, typ)
	}
	return blk.Bytes, nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}

// KeyID names a public key in a token's kid header: the first 8 bytes of the SHA-256 of its
// bytes, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// NotAfterHeader is the PEM header of a retired public key: the instant (RFC 3339) after
// which it verifies nothing.
const NotAfterHeader = "Not-After"

// LoadVerifyKeys reads every PUBLIC KEY block of the PEM file at path: the current key
// first, then the keys a rotation retired, each with its Not-After header.
func LoadVerifyKeys(path string) ([]VerifyKey, error) {
	rest, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	var keys []VerifyKey
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "PUBLIC KEY" {
			continue
		}
		k, err := x509.ParsePKIXPublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("auth: %s: %w", path, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("auth: %s: not an Ed25519 key", path)
		}
		vk := VerifyKey{Key: pub}
		if na, ok := blk.Headers[NotAfterHeader]; ok {
			if vk.NotAfter, err = time.Parse(time.RFC3339, na); err != nil {
				return nil, fmt.Errorf("auth: %s: %s header: %w", path, NotAfterHeader, err)
			}
		}
		keys = append(keys, vk)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("auth: %s: no PUBLIC KEY PEM block", path)
	}
	if !keys[0].NotAfter.IsZero() {
		return nil, fmt.Errorf("auth: %s: the first key is the current one and has no %s header", path, NotAfterHeader)
	}
	return keys, nil
}

// RotateKeyPair replaces the user-token key pair in dir with a new one. The old public key
// stays in the public key file, after the new one, with a Not-After of now + maxLifetime
// (+ clock leeway): every token it signed has expired by then. Keys retired earlier stay
// until their own Not-After has passed. Verifiers that reload the file (platform does,
// within seconds) accept both meanwhile; the signer that reloads the private key signs
// with the new one.
func RotateKeyPair(dir string, maxLifetime time.Duration, now time.Time) (newKID string, err error) {
	privPath, pubPath := filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, PublicKeyFile)
	old, err := LoadPrivateKey(privPath)
	if err != nil {
		return "", err
	}
	keys, err := LoadVerifyKeys(pubPath)
	if err != nil {
		return "", err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("auth: generate key: %w", err)
	}
	var out []byte
	add := func(k ed25519.PublicKey, notAfter time.Time) error {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return fmt.Errorf("auth: %w", err)
		}
		blk := &pem.Block{Type: "PUBLIC KEY", Bytes: der}
		if !notAfter.IsZero() {
			blk.Headers = map[string]string{NotAfterHeader: notAfter.UTC().Format(time.RFC3339)}
		}
		out = append(out, pem.EncodeToMemory(blk)...)
		return nil
	}
	if err := add(pub, time.Time{}); err != nil {
		return "", err
	}
	if err := add(old.Public().(ed25519.PublicKey), now.Add(maxLifetime+leeway)); err != nil {
		return "", err
	}
	for _, k := range keys {
		if !k.NotAfter.IsZero() && k.NotAfter.After(now) && !k.Key.Equal(old.Public()) {
			if err := add(k.Key, k.NotAfter); err != nil {
				return "", err
			}
		}
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	// Public keys first: a verifier must know the new key before any token is signed with it.
	if err := writeFileAtomic(pubPath, out, 0o644); err != nil {
		return "", err
	}
	if err := writeFileAtomic(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return "", err
	}
	return KeyID(pub), nil
}
