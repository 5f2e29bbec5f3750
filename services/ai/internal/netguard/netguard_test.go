package netguard

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestGlobal(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"93.184.215.14": true, "8.8.8.8": true, "2606:4700::1111": true,
		"127.0.0.1": false, "10.1.1.1": false, "172.31.0.1": false, "192.168.0.1": false, "169.254.169.254": false,
		"0.0.0.0": false, "100.64.0.1": false, "192.0.2.1": false, "255.255.255.255": false, "224.0.0.1": false,
		"::1": false, "::": false, "fe80::1": false, "fd00::1": false, "ff02::1": false, "2001:db8::1": false,
		"::ffff:10.0.0.1": false, "64:ff9b::808:808": true, "64:ff9b::7f00:1": false, "2002:7f00:1::": false, "2002:808:808::": true,
	}
	for s, want := range cases {
		if got := Global(netip.MustParseAddr(s)); got != want {
			t.Errorf("Global(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	p, err := Parse([]string{"10.0.0.0/8", " 127.0.0.1 ", "Ollama.LAN", "false", ""})
	if err != nil {
		t.Fatal(err)
	}
	if !p.AllowsAddr(netip.MustParseAddr("10.9.9.9")) || !p.AllowsAddr(netip.MustParseAddr("127.0.0.1")) ||
		p.AllowsAddr(netip.MustParseAddr("127.0.0.2")) || !p.AllowsHost("ollama.lan") || p.AllowsHost("localhost") || p.AllowsAll() {
		t.Errorf("policy %+v", p)
	}
	if _, err := Parse([]string{"10.0.0.0/99", "bad host!"}); err == nil {
		t.Error("bad entries accepted")
	}
	if (&Policy{}).AllowsAddr(netip.MustParseAddr("127.0.0.1")) {
		t.Error("the zero policy allows loopback")
	}
}

// The transport refuses the connection itself — after resolution, whatever the URL said.
func TestTransportRefusesAtDial(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	for _, tc := range []struct {
		policy *Policy
		ok     bool
	}{{&Policy{}, false}, {MustParse("127.0.0.1"), true}, {MustParse("true"), true}} {
		resp, err := (&http.Client{Transport: tc.policy.Transport()}).Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBlocked)) {
			t.Errorf("policy %+v: err = %v", tc.policy, err)
		}
	}
}
