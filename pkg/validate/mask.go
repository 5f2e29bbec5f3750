package validate

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/errs"
)

// UpdatePaths is the one reading of an Update RPC's update_mask: the paths it names, each
// of which must be one of updatable; or, when it names none, the fields of resource that
// are populated and updatable (AIP-134: an empty mask means "the fields present", as the
// REST edge already derives from a PATCH body). A proto3 scalar at its zero value is not
// present, so clearing one needs an explicit mask. Populated fields that are not
// updatable (the id naming the resource, output-only fields) are ignored under an implied
// mask, and refused when a mask names them.
func UpdatePaths(mask *fieldmaskpb.FieldMask, resource proto.Message, updatable []string) ([]string, error) {
	paths := mask.GetPaths()
	if len(paths) > 0 {
		for i, p := range paths {
			if !slices.Contains(updatable, p) {
				return nil, errs.Invalid("update_mask", "paths[%d] %q is not updatable; updatable: %s", i, Truncate(p, 64), strings.Join(updatable, ", "))
			}
		}
		return paths, nil
	}
	if resource != nil {
		resource.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if name := string(fd.Name()); slices.Contains(updatable, name) {
				paths = append(paths, name)
			}
			return true
		})
	}
	if len(paths) == 0 {
		return nil, errs.Invalid("update_mask", "empty, and the request sets none of the updatable fields: name the fields to change (%s)", strings.Join(updatable, ", "))
	}
	slices.SortFunc(paths, func(a, b string) int { return slices.Index(updatable, a) - slices.Index(updatable, b) })
	return paths, nil
}
