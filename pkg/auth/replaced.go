package auth

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ReplacedTokensFile, in a key directory, lists the admin tokens the launcher replaced:
// the launcher issues the admin token offline (it holds the signing key), so it cannot
// record a revocation in the gateway's database itself. It writes the replaced token's id
// here instead, and the gateway — given the file as THEFOLD_AUTH_REPLACED_ADMIN_TOKENS_FILE
// — revokes each listed token through its one revocation mechanism, at start and whenever
// the file changes, like it follows its signing key file.
const ReplacedTokensFile = "replaced-admin-tokens"

// ReplacedToken is a token that was replaced: its id and when it would have expired (its
// revocation must last until then; after that it is dropped from the file).
type ReplacedToken struct {
	ID     string
	Expire time.Time
}

// ReadReplacedTokens reads a replaced-tokens file: one "<token id> <expiry, Unix seconds>"
// line per token. Lines that do not parse are skipped: the file is only ever added to, and
// a reader that caught a write half-way reads it again when the write changes it.
func ReadReplacedTokens(path string) ([]ReplacedToken, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []ReplacedToken
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, exp, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		secs, err := strconv.ParseInt(exp, 10, 64)
		if !ok || err != nil || id == "" || len(id) > 128 {
			continue
		}
		out = append(out, ReplacedToken{ID: id, Expire: time.Unix(secs, 0)})
	}
	return out, sc.Err()
}

// WriteReplacedTokens writes the file with the tokens still unexpired at now (mode 0600).
// It is rewritten in place rather than renamed over: a container that mounts the single
// file keeps seeing the same inode, so it sees the change.
func WriteReplacedTokens(path string, tokens []ReplacedToken, now time.Time) error {
	var b strings.Builder
	for _, t := range tokens {
		if t.Expire.After(now) && t.ID != "" && !strings.ContainsAny(t.ID, " \n") {
			fmt.Fprintf(&b, "%s %d\n", t.ID, t.Expire.Unix())
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		return fmt.Errorf("auth: %w", err)
	}
	return f.Close()
}
