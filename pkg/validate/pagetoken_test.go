package validate

import (
	"testing"
	"time"
)

func TestTimeIDTokenRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 24, 9, 0, 0, 123456789, time.UTC)
	const id = "0b8f6d64-3c3e-4f1e-9d8a-0a6d1c9f2e11"
	tok := EncodeTimeIDToken("x1", at, id)
	gotAt, gotID, err := DecodeTimeIDToken(tok, "x1", "ListThings")
	if err != nil || !gotAt.Equal(at) || gotID != id {
		t.Fatalf("round trip = %v %q %v", gotAt, gotID, err)
	}
	for name, bad := range map[string]string{
		"another version": EncodeTimeIDToken("x2", at, id),
		"not a time":      EncodePageToken("x1", "soon", id),
		"not a UUID":      EncodePageToken("x1", "1", "42"),
		"one part":        EncodePageToken("x1", "1"),
		"not base64":      "!!",
	} {
		if _, _, err := DecodeTimeIDToken(bad, "x1", "ListThings"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
