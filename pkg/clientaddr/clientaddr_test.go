package clientaddr

import (
	"net/netip"
	"testing"
)

func TestFromChain(t *testing.T) {
	t.Parallel()
	trusted, err := ParsePrefixes([]string{" 10.0.0.0/8", "192.0.2.1", ""})
	if err != nil {
		t.Fatal(err)
	}
	isTrusted := func(a string) bool { return InPrefixes(a, trusted) }
	cases := []struct {
		peer string
		xff  []string
		want string
	}{
		{"203.0.113.5", []string{"198.51.100.1"}, "203.0.113.5"},                    // not a proxy: its header is ignored
		{"10.1.2.3", nil, "10.1.2.3"},                                               // a proxy with no header is the client
		{"10.1.2.3", []string{"198.51.100.1"}, "198.51.100.1"},                      // what the proxy vouches for
		{"10.1.2.3", []string{"6.6.6.6, 198.51.100.1"}, "198.51.100.1"},             // a client's own claim, left of it, is not
		{"10.1.2.3", []string{"6.6.6.6", "198.51.100.1, 10.9.9.9"}, "198.51.100.1"}, // through two proxies, values joined
		{"192.0.2.1", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},                   // only proxies: the farthest
		{"10.1.2.3", []string{"garbage"}, "garbage"},
	}
	for _, tc := range cases {
		if got := FromChain(tc.peer, tc.xff, isTrusted); got != tc.want {
			t.Errorf("FromChain(%s, %q) = %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
	}
	if _, err := ParsePrefixes([]string{"proxy.example.com"}); err == nil {
		t.Error("a host name is not a proxy address")
	}
	if !InPrefixes("::ffff:10.0.0.1", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}) || Host("[::1]:80") != "::1" || Host("x") != "x" {
		t.Error("mapped addresses and hosts")
	}
}
