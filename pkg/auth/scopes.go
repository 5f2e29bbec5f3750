package auth

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Scope areas: a service's short name, "auth" for the gateway's AuthService and
// UserService, or "*" for all.
var scopeAreas = []string{"tasks", "agent", "builder", "github", "memory", "skills", "ai", "sandbox", "auth", "*"}

// Scope accesses: "read" allows the RPCs marked NO_SIDE_EFFECTS, "write" every RPC.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// CheckScopes reports the first scope that is not "<area>:<access>" with a known area and
// access.
func CheckScopes(scopes []string) error {
	for _, s := range scopes {
		area, access, ok := strings.Cut(s, ":")
		if !ok || !slices.Contains(scopeAreas, area) || (access != ScopeRead && access != ScopeWrite) {
			return fmt.Errorf("scope %q: want <area>:<read|write> with area one of %s", s, strings.Join(scopeAreas, ", "))
		}
	}
	return nil
}

// alwaysInScope are methods any credential may call whatever its scopes: asking who you are.
var alwaysInScope = []string{"/thefold.gateway.v1.AuthService/WhoAmI"}

// ScopesAllow reports whether scopes allow calling method ("/thefold.tasks.v1.TaskService/
// GetTask"). No scopes means no narrowing. Methods outside TheFold's packages (health,
// reflection) are allowed.
func ScopesAllow(scopes []string, method string) bool {
	if len(scopes) == 0 || slices.Contains(alwaysInScope, method) {
		return true
	}
	area, read, ok := methodArea(method)
	if !ok {
		return true
	}
	for _, s := range scopes {
		a, access, _ := strings.Cut(s, ":")
		if (a == area || a == "*") && (access == ScopeWrite || read) {
			return true
		}
	}
	return false
}

type methodInfo struct {
	area   string
	read   bool
	theirs bool
}

var methodAreas sync.Map // method → methodInfo

// methodArea returns the scope area of method and whether it only reads; ok is false for
// methods outside thefold.* packages.
func methodArea(method string) (area string, read, ok bool) {
	if v, hit := methodAreas.Load(method); hit {
		mi := v.(methodInfo)
		return mi.area, mi.read, !mi.theirs
	}
	mi := describe(method)
	methodAreas.Store(method, mi)
	return mi.area, mi.read, !mi.theirs
}

func describe(method string) methodInfo {
	full := strings.TrimPrefix(method, "/")
	svc, name, _ := strings.Cut(full, "/")
	pkgName, ok := strings.CutPrefix(svc, "thefold.")
	if !ok {
		return methodInfo{theirs: true}
	}
	area, _, _ := strings.Cut(pkgName, ".")
	if area == "gateway" {
		area = "auth"
	}
	// An unknown method is a write: what is not known to be safe is not read-only.
	mi := methodInfo{area: area}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc + "." + name))
	if err != nil {
		return mi
	}
	if md, ok := d.(protoreflect.MethodDescriptor); ok {
		if o, ok := md.Options().(*descriptorpb.MethodOptions); ok && o != nil {
			mi.read = o.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
		}
	}
	return mi
}
