package stack

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Reserved ports are distinct, below the kernel's ephemeral range, and held: another
// process (here another open file description, which flock treats alike) cannot take one.
func TestReservedPortsAreHeldForThisProcess(t *testing.T) {
	lo, hi := portRange()
	seen := map[int]bool{}
	for i := 0; i < 50; i++ {
		p, err := reservePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < lo || p > hi {
			t.Fatalf("port %d outside %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "thefold-ports", strconv.Itoa(p)), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			t.Errorf("port %d's lock could be taken by another", p)
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var eph int
		for _, c := range string(b) {
			if c < '0' || c > '9' {
				break
			}
			eph = eph*10 + int(c-'0')
		}
		if hi >= eph {
			t.Errorf("range %d-%d reaches the ephemeral ports from %d", lo, hi, eph)
		}
	}
}
