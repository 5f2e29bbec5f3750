// Package seal encrypts small secrets for storage (AES-256-GCM, a fresh random nonce per
// secret): tokens people hand TheFold to act for them, kept in a database that backups and
// operators see, readable only with the service's key.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the key length in bytes.
const KeySize = 32

// Box seals and opens secrets with one key.
type Box struct{ aead cipher.AEAD }

// New returns a box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal: want a %d-byte key, got %d bytes", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plain: nonce || ciphertext || tag.
func (b *Box) Seal(plain string) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: random: %w", err)
	}
	return b.aead.Seal(nonce, nonce, []byte(plain), nil), nil
}

// Open decrypts what Seal made; a wrong key or altered bytes are an error.
func (b *Box) Open(sealed []byte) (string, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return "", errors.New("seal: sealed secret too short")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], nil)
	if err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	return string(plain), nil
}

// LoadKeyFile reads a key file (64 hex digits). With create, a missing file is made with
// a new random key, mode 0600, in a 0700 directory.
func LoadKeyFile(path string, create bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		key := make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("seal: random: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("seal: key file: %w", err)
		}
		// Written whole under another name, then linked to path, which fails if path exists:
		// path never names a file still being written. (Created with O_EXCL and then written,
		// a replica starting beside this one read it empty: "want 64 hex digits".)
		f, err := os.CreateTemp(filepath.Dir(path), ".key-*")
		if err != nil {
			return nil, fmt.Errorf("seal: key file: %w", err)
		}
		defer os.Remove(f.Name())
		_, err = f.WriteString(hex.EncodeToString(key) + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Link(f.Name(), path)
		}
		if errors.Is(err, os.ErrExist) {
			return LoadKeyFile(path, false) // another process made it first
		}
		if err != nil {
			return nil, fmt.Errorf("seal: key file: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("seal: key file: %w", err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != KeySize {
		return nil, fmt.Errorf("seal: key file %s: want %d hex digits", path, 2*KeySize)
	}
	return key, nil
}
