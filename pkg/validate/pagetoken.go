package validate

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/thefold/thefold/pkg/errs"
)

// Page tokens are opaque to clients: "<version>:<part>:<part>…", base64url-encoded. The
// version lets a service change what a token holds without misreading old ones; parts must
// not contain ':'.

// EncodePageToken returns the token holding parts under version.
func EncodePageToken(version string, parts ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(version + ":" + strings.Join(parts, ":")))
}

// DecodePageToken returns the n parts of tok, or InvalidArgument on page_token naming the
// method whose response the token should come from. The caller parses each part and
// returns BadPageToken(method) when one does not parse.
func DecodePageToken(tok, version string, n int, method string) ([]string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, BadPageToken(method)
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != n+1 || parts[0] != version {
		return nil, BadPageToken(method)
	}
	return parts[1:], nil
}

// BadPageToken is the error for a page_token a service did not issue.
func BadPageToken(method string) error {
	return errs.Invalid("page_token", "not a token from a previous %s response", method)
}

// EncodeTimeIDToken is a page token for keyset paging by (time, UUID), newest first: the
// last row of a page, from which DecodeTimeIDToken restarts.
func EncodeTimeIDToken(version string, t time.Time, id string) string {
	return EncodePageToken(version, strconv.FormatInt(t.UnixNano(), 10), id)
}

// DecodeTimeIDToken returns the time and UUID of a token from EncodeTimeIDToken, or
// InvalidArgument on page_token naming method.
func DecodeTimeIDToken(tok, version, method string) (time.Time, string, error) {
	parts, err := DecodePageToken(tok, version, 2, method)
	if err != nil {
		return time.Time{}, "", err
	}
	nanos, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return time.Time{}, "", BadPageToken(method)
	}
	if _, err := UUID("page_token", parts[1], true); err != nil {
		return time.Time{}, "", BadPageToken(method)
	}
	return time.Unix(0, nanos).UTC(), parts[1], nil
}
