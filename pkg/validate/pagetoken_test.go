package validate

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTimeIDTokenRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 9, 0, 0, 123456789, time.UTC)
	const id = "0b8f6d64-3c3e-4f1e-9d8a-0a6d1c9f2e11"
	tok := EncodeTimeIDToken("x1", at, id)
	gotAt, gotID, err := DecodeTimeIDToken(tok, "x1", "ListThings")
	// Microseconds are PostgreSQL's precision: the nanoseconds are dropped.
	if want := at.Truncate(time.Microsecond); err != nil || !gotAt.Equal(want) || gotID != id {
		t.Fatalf("round trip = %v %q %v, want %v", gotAt, gotID, err, want)
	}
	// The token spells microseconds, so the services' earlier microsecond tokens still read.
	if want := EncodePageToken("x1", "1795510800123456", id); tok != want {
		t.Errorf("token = %q, want %q", tok, want)
	}
	// An upper-case UUID reads back canonical, as the database prints it.
	if _, gotID, err := DecodeTimeIDToken(EncodePageToken("x1", "1", strings.ToUpper(id)), "x1", "ListThings"); err != nil || gotID != id {
		t.Errorf("upper-case id = %q %v", gotID, err)
	}
	for name, bad := range map[string]string{
		"another version": EncodeTimeIDToken("x2", at, id),
		"not a time":      EncodePageToken("x1", "soon", id),
		"not a UUID":      EncodePageToken("x1", "1", "42"),
		"one part":        EncodePageToken("x1", "1"),
		"before 1970":     EncodePageToken("x1", "-1", id),
		"after 9999":      EncodePageToken("x1", "253402300800000000", id),
		// What the codec issued while it kept nanoseconds: refused, not misread.
		"nanoseconds": EncodePageToken("x1", strconv.FormatInt(at.UnixNano(), 10), id),
		"not base64":  "!!",
	} {
		if _, _, err := DecodeTimeIDToken(bad, "x1", "ListThings"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
