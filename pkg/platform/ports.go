package platform

import "fmt"

// ServiceNames lists the nine services in start order (dependencies first, gateway last).
var ServiceNames = []string{"tasks", "memory", "skills", "ai", "sandbox", "github", "builder", "agent", "gateway"}

// GRPCPorts are the default gRPC ports. The gateway's REST edge listens on 8080.
var GRPCPorts = map[string]int{
	"gateway": 9100,
	"tasks":   9101,
	"memory":  9102,
	"skills":  9103,
	"ai":      9104,
	"sandbox": 9105,
	"github":  9106,
	"builder": 9107,
	"agent":   9108,
}

// GatewayHTTPPort is the default REST edge port.
const GatewayHTTPPort = 8080

// AdminPort is a service's default admin HTTP port: its gRPC port + 100.
func AdminPort(service string) int { return GRPCPorts[service] + 100 }

// AddrEnv is the variable through which other services find service, e.g. THEFOLD_TASKS_ADDR.
func AddrEnv(service string) string {
	b := []byte(service)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return "THEFOLD_" + string(b) + "_ADDR"
}

// Defaults returns the default listen addresses for service and the addresses of every
// service, as configuration defaults.
func Defaults(service string) map[string]string {
	d := map[string]string{
		"THEFOLD_GRPC_ADDR":  fmt.Sprintf(":%d", GRPCPorts[service]),
		"THEFOLD_ADMIN_ADDR": fmt.Sprintf(":%d", AdminPort(service)),
	}
	for _, s := range ServiceNames {
		d[AddrEnv(s)] = fmt.Sprintf("127.0.0.1:%d", GRPCPorts[s])
	}
	return d
}
