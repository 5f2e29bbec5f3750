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

// maxTokenMicros is the end of year 9999 in Unix microseconds: no row has a later time, and
// PostgreSQL would refuse some of them as out of range.
const maxTokenMicros = 253402300799999999

// EncodeTimeIDToken is the one page token for keyset paging by (time, UUID), newest first:
// the last row of a page, from which DecodeTimeIDToken restarts. The time is kept in Unix
// microseconds, PostgreSQL's timestamp precision, so a token names the row's time exactly
// whatever Go time it came from; finer digits are dropped.
func EncodeTimeIDToken(version string, t time.Time, id string) string {
	return EncodePageToken(version, strconv.FormatInt(t.UnixMicro(), 10), id)
}

// DecodeTimeIDToken returns the time (UTC, microseconds) and canonical UUID of a token
// from EncodeTimeIDToken, or InvalidArgument on page_token naming method. A time outside
// year 1970 to 9999 is refused: tokens issued before the codec kept microseconds held
// nanoseconds, which read as microseconds lie tens of thousands of years ahead, so such a
// token is INVALID_ARGUMENT rather than a page from the wrong place.
func DecodeTimeIDToken(tok, version, method string) (time.Time, string, error) {
	parts, err := DecodePageToken(tok, version, 2, method)
	if err != nil {
		return time.Time{}, "", err
	}
	micros, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || micros < 0 || micros > maxTokenMicros {
		return time.Time{}, "", BadPageToken(method)
	}
	id, err := UUID("page_token", parts[1], true)
	if err != nil {
		return time.Time{}, "", BadPageToken(method)
	}
	return time.UnixMicro(micros).UTC(), id, nil
}
