package contracts

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/timestamppb"
)

// theFoldFiles are the contract files linked into this package (every service's, through
// All, and the shared thefold.type.v1 package they import).
func theFoldFiles(t *testing.T) []protoreflect.FileDescriptor {
	t.Helper()
	var files []protoreflect.FileDescriptor
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		if strings.HasPrefix(string(f.Package()), "thefold.") {
			files = append(files, f)
		}
		return true
	})
	if len(files) < 10 {
		t.Fatalf("found %d TheFold contract files; the generated packages are not linked", len(files))
	}
	return files
}

// TestContractsFollowTheRules is the contract test: every proto of every service follows
// the machine-checkable rules of thefold/type/v1/conventions.proto.
func TestContractsFollowTheRules(t *testing.T) {
	t.Parallel()
	for _, v := range Check(theFoldFiles(t)) {
		t.Error(v)
	}
}

// TestSharedTypesAreShared checks the vocabulary is defined once: no service redefines a
// message or enum the shared package has, and each shared type is used by the services
// that need it.
func TestSharedTypesAreShared(t *testing.T) {
	t.Parallel()
	files := theFoldFiles(t)
	shared := map[protoreflect.Name]bool{}
	users := map[protoreflect.FullName]map[string]bool{}
	for _, f := range files {
		if f.Package() != "thefold.type.v1" {
			continue
		}
		walkMessages(f.Messages(), func(m protoreflect.MessageDescriptor) { shared[m.Name()] = true })
		for i := 0; i < f.Enums().Len(); i++ {
			shared[f.Enums().Get(i).Name()] = true
		}
	}
	for _, f := range files {
		if f.Package() == "thefold.type.v1" {
			continue
		}
		svc := strings.Split(string(f.Package()), ".")[1]
		walkMessages(f.Messages(), func(m protoreflect.MessageDescriptor) {
			if shared[m.Name()] {
				t.Errorf("%s redefines the shared thefold.type.v1.%s", m.FullName(), m.Name())
			}
			for i := 0; i < m.Fields().Len(); i++ {
				fd := m.Fields().Get(i)
				var typ protoreflect.FullName
				switch {
				case fd.Message() != nil:
					typ = fd.Message().FullName()
				case fd.Enum() != nil:
					typ = fd.Enum().FullName()
				}
				if strings.HasPrefix(string(typ), "thefold.type.v1.") {
					if users[typ] == nil {
						users[typ] = map[string]bool{}
					}
					users[typ][svc] = true
				}
			}
		})
		for i := 0; i < f.Enums().Len(); i++ {
			if e := f.Enums().Get(i); shared[e.Name()] {
				t.Errorf("%s redefines the shared thefold.type.v1.%s", e.FullName(), e.Name())
			}
		}
	}
	// Who must use what (the [CONTRACTS] issue): one Usage, one Diagnostic, one file-change
	// vocabulary and one plan across the services that need them.
	for typ, want := range map[protoreflect.FullName][]string{
		"thefold.type.v1.Usage":          {"ai", "builder", "agent"},
		"thefold.type.v1.Diagnostic":     {"ai", "builder", "sandbox", "skills", "agent"},
		"thefold.type.v1.FileAction":     {"ai", "builder"},
		"thefold.type.v1.FileChange":     {"ai", "github"},
		"thefold.type.v1.Edit":           {"sandbox"},
		"thefold.type.v1.Plan":           {"ai", "builder"},
		"thefold.type.v1.PullRequestRef": {"tasks", "agent"},
		"thefold.type.v1.Heartbeat":      {"tasks", "agent", "builder"},
	} {
		for _, svc := range want {
			if !users[typ][svc] {
				t.Errorf("%s does not use %s", svc, typ)
			}
		}
	}
}

// TestCheckFindsViolations proves the contract test can fail: a file that breaks each rule
// yields each violation.
func TestCheckFindsViolations(t *testing.T) {
	t.Parallel()
	const bad = `
name: "bad/v1/bad.proto" package: "bad.v1" syntax: "proto3"
dependency: "google/protobuf/timestamp.proto"
message_type { name: "Thing"
  field { name: "cost_usd" number: 1 type: TYPE_DOUBLE label: LABEL_OPTIONAL }
  field { name: "command" number: 2 type: TYPE_STRING label: LABEL_OPTIONAL }
  field { name: "price" number: 3 type: TYPE_INT64 label: LABEL_OPTIONAL }
}
message_type { name: "CreateThingRequest" field { name: "name" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL } }
message_type { name: "WatchThingsRequest" field { name: "after_id" number: 1 type: TYPE_INT64 label: LABEL_OPTIONAL } }
message_type { name: "WatchThingsResponse"
  field { name: "id" number: 1 type: TYPE_INT64 label: LABEL_OPTIONAL }
  field { name: "thing" number: 2 type: TYPE_MESSAGE type_name: ".bad.v1.Thing" label: LABEL_OPTIONAL }
}
message_type { name: "ListThingsRequest" }
message_type { name: "ListThingsResponse" }
message_type { name: "UpdateThingRequest" }
message_type { name: "ArchiveThingRequest" field { name: "id" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL } }
message_type { name: "PolishThingRequest"
  field { name: "id" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
  field { name: "request_id" number: 2 type: TYPE_STRING label: LABEL_OPTIONAL }
}
enum_type { name: "Color" value { name: "COLOR_RED" number: 0 } value { name: "COLOR_BLUE" number: 1 } }
service { name: "ThingService"
  method { name: "CreateThing" input_type: ".bad.v1.CreateThingRequest" output_type: ".bad.v1.Thing" }
  method { name: "WatchThings" input_type: ".bad.v1.WatchThingsRequest" output_type: ".bad.v1.WatchThingsResponse" server_streaming: true
    options { idempotency_level: NO_SIDE_EFFECTS } }
  method { name: "ListThings" input_type: ".bad.v1.ListThingsRequest" output_type: ".bad.v1.ListThingsResponse" }
  method { name: "UpdateThing" input_type: ".bad.v1.UpdateThingRequest" output_type: ".bad.v1.Thing" }
  method { name: "ArchiveThing" input_type: ".bad.v1.ArchiveThingRequest" output_type: ".bad.v1.Thing" }
  method { name: "PolishThing" input_type: ".bad.v1.PolishThingRequest" output_type: ".bad.v1.Thing" }
  method { name: "InspectThing" input_type: ".bad.v1.ArchiveThingRequest" output_type: ".bad.v1.Thing"
    options { idempotency_level: NO_SIDE_EFFECTS } }
  method { name: "TouchThing" input_type: ".bad.v1.ArchiveThingRequest" output_type: ".bad.v1.Thing"
    options { idempotency_level: IDEMPOTENT } }
}`
	var fdp descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(bad), &fdp); err != nil {
		t.Fatal(err)
	}
	fd, err := protodesc.NewFile(&fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range Check([]protoreflect.FileDescriptor{fd}) {
		got = append(got, v.String())
	}
	for _, want := range []string{
		"bad.v1.Thing.cost_usd: money as a float",
		"bad.v1.Thing.command: command as a shell string",
		"bad.v1.Thing.price: money field must say its unit",
		"bad.v1.Color: enum without COLOR_UNSPECIFIED = 0",
		"bad.v1.ThingService.CreateThing: side-effecting create without string request_id",
		"bad.v1.ThingService.WatchThings: Watch without the shared envelope: WatchThingsResponse.time",
		"bad.v1.ThingService.WatchThings: Watch without the shared envelope: WatchThingsRequest.from_now",
		"bad.v1.ThingService.WatchThings: Watch without the shared envelope: WatchThingsResponse has no oneof payload",
		"bad.v1.ThingService.ListThings: read-only method without option idempotency_level",
		"bad.v1.ThingService.ListThings: list without page_size",
		"bad.v1.ThingService.ListThings: list without next_page_token",
		"bad.v1.ThingService.UpdateThing: update without a google.protobuf.FieldMask update_mask",
		// Any side effect needs a request_id, whatever the method's name; declaring it
		// IDEMPOTENT is not a reason.
		"bad.v1.ThingService.ArchiveThing: side-effecting method without string request_id",
		"bad.v1.ThingService.TouchThing: side-effecting method without string request_id",
		"bad.v1.ThingService.UpdateThing: side-effecting method without string request_id",
	} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("no violation %q; got:\n%s", want, strings.Join(got, "\n"))
		}
	}
	// A request_id, or no side effect, satisfies the rule.
	for _, fine := range []string{"bad.v1.ThingService.PolishThing:", "bad.v1.ThingService.InspectThing:"} {
		if i := slices.IndexFunc(got, func(g string) bool { return strings.HasPrefix(g, fine) }); i >= 0 {
			t.Errorf("unexpected violation %q", got[i])
		}
	}
}

func TestUpperSnake(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"TaskStatus": "TASK_STATUS", "Severity": "SEVERITY", "CallPhase": "CALL_PHASE",
		"APIKeyScope": "API_KEY_SCOPE", "HTTPMethod": "HTTP_METHOD", "Color": "COLOR",
	} {
		if got := upperSnake(in); got != want {
			t.Errorf("upperSnake(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestIdempotencyExemptionsExist keeps the exemption list honest: each names a real
// side-effecting method that has no request_id of its own, with a reason.
func TestIdempotencyExemptionsExist(t *testing.T) {
	t.Parallel()
	theFoldFiles(t)
	check := func(list string, entries map[string]string) {
		for full, reason := range entries {
			i := strings.LastIndex(full, ".")
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(full[:i]))
			if err != nil {
				t.Errorf("%s %s: no service %s", list, full, full[:i])
				continue
			}
			m := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(full[i+1:]))
			switch {
			case m == nil:
				t.Errorf("%s %s: no such method", list, full)
			case hasRequestID(m.Input()):
				t.Errorf("%s %s has a request_id: take it off the list", list, full)
			case idempotency(m) == descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
				t.Errorf("%s %s has no side effect: take it off the list", list, full)
			case strings.TrimSpace(reason) == "":
				t.Errorf("%s %s: no reason", list, full)
			}
		}
	}
	check("naturallyIdempotent", naturallyIdempotent)
}
