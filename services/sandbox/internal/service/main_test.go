package service_test

import (
	"os"
	"testing"

	"github.com/thefold/thefold/services/sandbox/internal/egress"
)

// TestMain lets this test binary serve as the bwrap sandbox's egress forwarder, as the
// service's own binary does.
func TestMain(m *testing.M) {
	egress.MaybeRunForwarder()
	os.Exit(m.Run())
}
