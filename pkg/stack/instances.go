package stack

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/thefold/thefold/pkg/platform"
)

// ReplicaPorts are the listen ports of one more process of a service, beyond its first.
type ReplicaPorts struct {
	GRPC, Admin int
	// HTTP is the REST port of a gateway replica (0 for the other services).
	HTTP int `json:",omitempty"`
}

// Instance is one process of the stack: a service's first process is named after the
// service ("agent"), its replicas "agent-2", "agent-3", … Each has its own ports, log and
// pid file; all of a service's instances share its binary, database role and identity.
type Instance struct {
	Name, Service string
	GRPC, Admin   int
	// HTTP is the gateway's REST port (0 for the other services).
	HTTP int
}

// Addr is the instance's gRPC address.
func (i Instance) Addr() string { return fmt.Sprintf("127.0.0.1:%d", i.GRPC) }

// Pinned are the services that run as one process, and why: more would not share what
// the first keeps on its own.
var Pinned = map[string]string{
	// A sandbox's workspace is a directory (or container) of the process that made it, and
	// every call about it must reach that process: replicas need sandbox affinity (a
	// job's calls routed to the replica holding its workspace), which is not built.
	"sandbox": "its workspaces live in the process that created them; replicas need sandbox affinity, not built yet",
	// The local forge's bare repositories are one directory on one host; pushes and pull
	// requests of two processes would need a shared file system and one writer per
	// repository. With GitHub as the forge this would not hold, but the stack runs both.
	"github": "the local forge's repositories are one directory written by one process",
}

// ParseReplicas reads "agent=3,builder=2,gateway=2": how many processes of each named
// service (at least 1; services not named keep their count).
func ParseReplicas(s string) (map[string]int, error) {
	out := map[string]int{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if !ok || err != nil {
			return nil, fmt.Errorf("replicas %q: want <service>=<count>[,…], e.g. agent=3,builder=2", s)
		}
		name = strings.TrimSpace(name)
		if !slices.Contains(platform.ServiceNames, name) {
			return nil, fmt.Errorf("replicas: unknown service %q (one of %s)", name, strings.Join(platform.ServiceNames, ", "))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("replicas: %s named twice", name)
		}
		if n < 1 || n > 16 {
			return nil, fmt.Errorf("replicas: %s=%d: want 1 to 16 processes", name, n)
		}
		if why, pinned := Pinned[name]; pinned && n != 1 {
			return nil, fmt.Errorf("replicas: %s runs as one process: %s", name, why)
		}
		out[name] = n
	}
	return out, nil
}

// SetReplicas sets how many processes each named service runs (ParseReplicas's map), and
// gives the new replicas ports: on a stack with the default ports, replica k of a service
// listens 1000·(k-1) above its first process (agent-2's gRPC on 10108, admin on 10208)
// and a gateway replica's REST port is 8080+k-1; on a stack with picked ports, free ones.
// Replicas already given ports keep them. Start the stack (again) to run them.
func (s *Stack) SetReplicas(counts map[string]int) error {
	for svc, n := range counts {
		if !slices.Contains(platform.ServiceNames, svc) {
			return fmt.Errorf("stack: replicas: unknown service %q", svc)
		}
		if why, pinned := Pinned[svc]; pinned && n != 1 {
			return fmt.Errorf("stack: replicas: %s runs as one process: %s", svc, why)
		}
		if n < 1 {
			return fmt.Errorf("stack: replicas: %s: want at least 1 process", svc)
		}
		have := s.Ports.Replicas[svc]
		if n-1 <= len(have) {
			have = have[:n-1]
		}
		defaults := s.Ports.GRPC[svc] == platform.GRPCPorts[svc]
		for k := len(have) + 2; k <= n; k++ {
			var r ReplicaPorts
			if defaults {
				r = ReplicaPorts{GRPC: s.Ports.GRPC[svc] + 1000*(k-1), Admin: s.Ports.Admin[svc] + 1000*(k-1)}
				if svc == "gateway" {
					r.HTTP = s.Ports.GatewayHTTP + k - 1
				}
			} else {
				var err error
				if r.GRPC, err = reservePort(); err != nil {
					return err
				}
				if r.Admin, err = reservePort(); err != nil {
					return err
				}
				if svc == "gateway" {
					if r.HTTP, err = reservePort(); err != nil {
						return err
					}
				}
			}
			have = append(have, r)
		}
		if s.Ports.Replicas == nil {
			s.Ports.Replicas = map[string][]ReplicaPorts{}
		}
		if len(have) == 0 {
			delete(s.Ports.Replicas, svc)
		} else {
			s.Ports.Replicas[svc] = have
		}
	}
	return nil
}

// Replicas is how many processes each service runs.
func (s *Stack) Replicas() map[string]int {
	out := map[string]int{}
	for _, svc := range platform.ServiceNames {
		out[svc] = 1 + len(s.Ports.Replicas[svc])
	}
	return out
}

// Instances are the stack's processes, service by service in platform.ServiceNames order.
func (s *Stack) Instances() []Instance {
	var out []Instance
	for _, svc := range platform.ServiceNames {
		out = append(out, s.InstancesOf(svc)...)
	}
	return out
}

// InstancesOf are svc's processes: its first, then its replicas.
func (s *Stack) InstancesOf(svc string) []Instance {
	first := Instance{Name: svc, Service: svc, GRPC: s.Ports.GRPC[svc], Admin: s.Ports.Admin[svc]}
	if svc == "gateway" {
		first.HTTP = s.Ports.GatewayHTTP
	}
	out := []Instance{first}
	for i, r := range s.Ports.Replicas[svc] {
		out = append(out, Instance{Name: fmt.Sprintf("%s-%d", svc, i+2), Service: svc, GRPC: r.GRPC, Admin: r.Admin, HTTP: r.HTTP})
	}
	return out
}

// instance finds the instance called name ("agent", "agent-2").
func (s *Stack) instance(name string) (Instance, bool) {
	for _, in := range s.InstancesOf(serviceOf(name)) {
		if in.Name == name {
			return in, true
		}
	}
	return Instance{}, false
}

// serviceOf is the service of an instance name: "agent-2" → "agent".
func serviceOf(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

// AddrList is svc's gRPC addresses, comma-separated, as its callers are given them
// (THEFOLD_<SVC>_ADDR; pkg/grpcclient spreads calls over the list).
func (s *Stack) AddrList(svc string) string {
	var addrs []string
	for _, in := range s.InstancesOf(svc) {
		addrs = append(addrs, in.Addr())
	}
	return strings.Join(addrs, ",")
}

// GatewayURLs are the REST addresses of every gateway process.
func (s *Stack) GatewayURLs() []string {
	var out []string
	for _, in := range s.InstancesOf("gateway") {
		out = append(out, fmt.Sprintf("http://127.0.0.1:%d", in.HTTP))
	}
	return out
}
