package grpcclient

import (
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
)

// listScheme names the resolver of a fixed list of addresses: a target
// "10.0.0.1:9101,10.0.0.2:9101" (THEFOLD_TASKS_ADDR with two replicas) is dialled as
// "thefold-list:///10.0.0.1:9101,10.0.0.2:9101", and the round_robin policy of every
// connection (serviceConfig) spreads the calls over the list. A single address keeps
// gRPC's default, DNS, which a name with several records (a Kubernetes headless Service,
// "dns:///tasks:9101") spreads the same way.
const listScheme = "thefold-list"

// listTarget turns a comma-separated address list into a target of the list resolver and
// the dial option that registers it for this connection only; a single address is left
// as it is. Every address must be host:port.
func listTarget(target string) (string, []grpc.DialOption, error) {
	if !strings.Contains(target, ",") {
		return target, nil, nil
	}
	addrs, err := parseList(target)
	if err != nil {
		return "", nil, err
	}
	return listScheme + ":///" + strings.Join(addrs, ","), []grpc.DialOption{grpc.WithResolvers(listBuilder{})}, nil
}

func parseList(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("grpcclient: address list %q has an empty entry", s)
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("grpcclient: address list %q: %q is not host:port", s, a)
		}
		out = append(out, a)
	}
	return out, nil
}

type listBuilder struct{}

func (listBuilder) Scheme() string { return listScheme }

func (listBuilder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	addrs, err := parseList(t.Endpoint())
	if err != nil {
		return nil, err
	}
	st := resolver.State{}
	for _, a := range addrs {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	if err := cc.UpdateState(st); err != nil {
		return nil, err
	}
	return listResolver{}, nil
}

// listResolver has nothing to re-resolve: the list is fixed for the process's life.
type listResolver struct{}

func (listResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (listResolver) Close()                                {}
