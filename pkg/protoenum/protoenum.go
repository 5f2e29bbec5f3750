// Package protoenum stores protobuf enum values by name: the value's name without its
// prefix, in lower case ("BUILD_STATUS_RUNNING" is "running"), the form the services'
// schemas keep in their TEXT columns and CHECK constraints.
package protoenum

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Name is v's stored name: its value name without prefix, lower case; "" for the zero
// value and for a number the enum does not define.
func Name(v protoreflect.Enum, prefix string) string {
	d := v.Descriptor().Values().ByNumber(v.Number())
	if d == nil || v.Number() == 0 {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(string(d.Name()), prefix))
}

// Parse is the value stored as s (Name's inverse) given the enum's generated value map;
// "" and unknown names are the zero value.
func Parse[E ~int32](s, prefix string, values map[string]int32) E {
	if s == "" {
		return 0
	}
	return E(values[prefix+strings.ToUpper(s)])
}
