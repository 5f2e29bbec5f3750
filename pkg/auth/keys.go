package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
