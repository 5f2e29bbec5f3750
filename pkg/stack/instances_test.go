package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/platform"
)

func TestParseReplicas(t *testing.T) {
	got, err := ParseReplicas("agent=3, builder=2,gateway=2")
	if err != nil || got["agent"] != 3 || got["builder"] != 2 || got["gateway"] != 2 || len(got) != 3 {
		t.Fatalf("ParseReplicas = %v, %v", got, err)
	}
	if got, err := ParseReplicas(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"agent":              "want <service>=<count>",
		"agent=x":            "want <service>=<count>",
		"agnet=2":            `unknown service "agnet"`,
		"agent=0":            "want 1 to 16",
		"agent=17":           "want 1 to 16",
		"agent=2,agent=3":    "agent named twice",
		"sandbox=2":          "sandbox runs as one process: its workspaces",
		"github=3":           "github runs as one process: the local forge",
		"agent=2,,gateway=2": "want <service>=<count>",
	} {
		if _, err := ParseReplicas(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseReplicas(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

// On the documented ports a replica's are predictable (what `thefold up --replicas`
// prints), and every caller is given every process of a service.
func TestReplicasOnDefaultPorts(t *testing.T) {
	s := &Stack{DataDir: t.TempDir(), Ports: DefaultPorts()}
	if err := s.SetReplicas(map[string]int{"agent": 3, "gateway": 2}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range s.Instances() {
		names = append(names, in.Name)
	}
	if got := strings.Join(names, " "); got != "tasks memory skills ai sandbox github builder agent agent-2 agent-3 gateway gateway-2" {
		t.Fatalf("instances: %s", got)
	}
	a3, _ := s.instance("agent-3")
	if a3.GRPC != platform.GRPCPorts["agent"]+2000 || a3.Admin != platform.AdminPort("agent")+2000 || a3.HTTP != 0 {
		t.Fatalf("agent-3: %+v", a3)
	}
	if got := s.GatewayURLs(); len(got) != 2 || got[1] != "http://127.0.0.1:8081" {
		t.Fatalf("gateway URLs: %v", got)
	}
	env := map[string]string{}
	for _, kv := range s.env(a3) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if want := "127.0.0.1:9108,127.0.0.1:10108,127.0.0.1:11108"; env["THEFOLD_AGENT_ADDR"] != want {
		t.Errorf("THEFOLD_AGENT_ADDR = %q, want %q", env["THEFOLD_AGENT_ADDR"], want)
	}
	if env["THEFOLD_GRPC_ADDR"] != "127.0.0.1:11108" || env["THEFOLD_AGENT_INSTANCE_ID"] != "agent-3" || env["THEFOLD_TASKS_ADDR"] != "127.0.0.1:9101" {
		t.Errorf("agent-3's env: grpc %q, instance %q, tasks %q", env["THEFOLD_GRPC_ADDR"], env["THEFOLD_AGENT_INSTANCE_ID"], env["THEFOLD_TASKS_ADDR"])
	}
	// Fewer again: the extra ports are dropped; a pinned service cannot be replicated.
	if err := s.SetReplicas(map[string]int{"agent": 1}); err != nil || len(s.InstancesOf("agent")) != 1 {
		t.Fatalf("back to one agent: %v, %v", err, s.InstancesOf("agent"))
	}
	if err := s.SetReplicas(map[string]int{"sandbox": 2}); err == nil {
		t.Fatal("two sandboxes accepted")
	}
}

// Replicas are processes of the stack like the rest: started, supervised (a killed one is
// back), reported, and stopped — also after a run with more of them than now configured.
func TestReplicasAreSupervisedAndStopped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := fakeStack(t)
	t.Cleanup(func() { _ = s.Stop(5 * time.Second) })
	if err := s.SetReplicas(map[string]int{"agent": 3, "gateway": 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartSupervisor(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	st := s.Status()
	if len(st) != len(platform.ServiceNames)+3 || st["agent-3"] == 0 || st["gateway-2"] == 0 || s.Running() != len(st) {
		t.Fatalf("status: %v", st)
	}
	// Each replica got its own instance id and ports (its log is its own).
	old := st["agent-2"]
	kill9(t, old)
	eventually(t, 15*time.Second, "agent-2 restarted", func() bool {
		pid := s.Status()["agent-2"]
		return pid != 0 && pid != old
	})
	if err := s.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for name, pid := range st {
		if pid != 0 && name != "agent-2" && alive(pid) {
			t.Errorf("%s (pid %d) still running after Stop", name, pid)
		}
	}
	// A later stack with one agent still stops the agent-3 a run with three left behind.
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	pid3 := s.Status()["agent-3"]
	fewer := *s
	fewer.Ports.Replicas = map[string][]ReplicaPorts{"gateway": s.Ports.Replicas["gateway"]}
	if _, ok := fewer.Status()["agent-3"]; ok {
		t.Fatal("agent-3 reported by a stack without it")
	}
	if err := fewer.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if alive(pid3) {
		t.Fatalf("agent-3 (pid %d) left running", pid3)
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, "run", "agent-3.pid")); !os.IsNotExist(err) {
		t.Fatalf("agent-3's pid file: %v", err)
	}
}
