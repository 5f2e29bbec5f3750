package backend

import "testing"

// The counter is read from cgroup v2's memory.events or v1's memory.oom_control; only a rise
// above what was seen is a new OOM kill.
func TestNewOOMKill(t *testing.T) {
	var seen int64
	v2 := []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
	if !NewOOMKill(v2, &seen) || seen != 1 {
		t.Fatalf("first kill: seen %d", seen)
	}
	if NewOOMKill(v2, &seen) {
		t.Fatal("the same count reported again")
	}
	if !NewOOMKill([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"), &seen) || seen != 2 {
		t.Fatalf("v1 count: seen %d", seen)
	}
	if NewOOMKill(nil, &seen) || NewOOMKill([]byte("oom_kill x y\n"), &seen) {
		t.Fatal("no counter read as a kill")
	}
}
