package contracts

import (
	"slices"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/platform"
)

func TestEveryServiceHasItsContract(t *testing.T) {
	t.Parallel()
	if len(All) != len(platform.ServiceNames) {
		t.Fatalf("%d contracts for %d services", len(All), len(platform.ServiceNames))
	}
	for _, name := range platform.ServiceNames {
		c, ok := For(name)
		if !ok {
			t.Fatalf("no contract for %s", name)
		}
		if len(c.Services) == 0 || len(c.Services) != len(c.Handlers) {
			t.Errorf("%s: %d services, %d handler sets", name, len(c.Services), len(c.Handlers))
		}
		for _, sd := range c.Services {
			if !strings.HasPrefix(sd.ServiceName, "thefold."+name+".v1.") {
				t.Errorf("%s serves %s, outside its package", name, sd.ServiceName)
			}
		}
	}
	if _, ok := For("nope"); ok {
		t.Error("contract for an unknown service")
	}
	if !slices.ContainsFunc(All, func(c Contract) bool { return c.Service == "gateway" }) {
		t.Error("gateway missing")
	}
}
