package testenv

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestRefusedAddrRefusesAndCannotBeTaken(t *testing.T) {
	addr := RefusedAddr(t)
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded; want refused", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v; want connection refused", addr, err)
		}
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("listen %s succeeded while RefusedAddr holds it", addr)
	}
}
