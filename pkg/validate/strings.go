package validate

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/thefold/thefold/pkg/errs"
)

// Strings checks every string of m — nested messages, repeated fields, map keys and values
// included — for a NUL byte or invalid UTF-8 and returns InvalidArgument naming the first
// bad field by its path ("task.title", "tasks[2].key", `labels["k"]`). No service stores or
// forwards such bytes (PostgreSQL refuses NUL in text, and the error would surface as
// Internal); the server's interceptor runs this on every request.
func Strings(m proto.Message) error {
	if m == nil {
		return nil
	}
	return stringsIn(m.ProtoReflect(), "")
}

func stringsIn(m protoreflect.Message, prefix string) error {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		name := prefix + string(fd.Name())
		v := m.Get(fd)
		switch {
		case fd.IsMap():
			var err error
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				path := name + "[" + mapKey(k) + "]"
				if fd.MapKey().Kind() == protoreflect.StringKind {
					if err = checkString(name+" key", k.String()); err != nil {
						return false
					}
				}
				err = checkValue(fd.MapValue(), mv, path)
				return err == nil
			})
			if err != nil {
				return err
			}
		case fd.IsList():
			l := v.List()
			for j := 0; j < l.Len(); j++ {
				if err := checkValue(fd, l.Get(j), name+"["+strconv.Itoa(j)+"]"); err != nil {
					return err
				}
			}
		default:
			if err := checkValue(fd, v, name); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return checkString(path, v.String())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return stringsIn(v.Message(), path+".")
	}
	return nil
}

func checkString(path, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return errs.Invalid(path, "must not contain a NUL byte")
	}
	if !utf8.ValidString(s) {
		return errs.Invalid(path, "not valid UTF-8")
	}
	return nil
}

func mapKey(k protoreflect.MapKey) string {
	if s, ok := k.Interface().(string); ok {
		return strconv.Quote(Truncate(strings.ToValidUTF8(s, "\uFFFD"), 64))
	}
	return fmt.Sprint(k.Interface())
}

// InvalidUTF8Path finds, in the wire bytes b of a message described by md, the path of the
// first string field whose bytes are not valid UTF-8 — the reason proto.Unmarshal refused
// them, which its error does not name. It returns "" when it finds none.
func InvalidUTF8Path(md protoreflect.MessageDescriptor, b []byte) string {
	return wirePath(md, b, "", 0)
}

// maxWireDepth matches the protobuf runtime's recursion limit.
const maxWireDepth = 100

func wirePath(md protoreflect.MessageDescriptor, b []byte, prefix string, depth int) string {
	if depth > maxWireDepth {
		return ""
	}
	index := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		vn := protowire.ConsumeFieldValue(num, typ, b)
		if vn < 0 {
			return ""
		}
		val := b[:vn]
		b = b[vn:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType {
			continue
		}
		raw, _ := protowire.ConsumeBytes(val)
		name := prefix + string(fd.Name())
		if fd.IsList() {
			name += "[" + strconv.Itoa(index[num]) + "]"
			index[num]++
		}
		switch {
		case fd.IsMap():
			if p := mapEntryPath(fd, raw, name, depth); p != "" {
				return p
			}
		case fd.Kind() == protoreflect.StringKind:
			if !utf8.Valid(raw) {
				return name
			}
		case fd.Kind() == protoreflect.MessageKind:
			if p := wirePath(fd.Message(), raw, name+".", depth+1); p != "" {
				return p
			}
		}
	}
	return ""
}

// mapEntryPath looks into one map entry (key = field 1, value = field 2).
func mapEntryPath(fd protoreflect.FieldDescriptor, entry []byte, name string, depth int) string {
	var key, value []byte
	var keyNum uint64
	for len(entry) > 0 {
		num, typ, n := protowire.ConsumeTag(entry)
		if n < 0 {
			return ""
		}
		entry = entry[n:]
		vn := protowire.ConsumeFieldValue(num, typ, entry)
		if vn < 0 {
			return ""
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			key, _ = protowire.ConsumeBytes(entry[:vn])
		case num == 1 && typ == protowire.VarintType:
			keyNum, _ = protowire.ConsumeVarint(entry[:vn])
		case num == 2 && typ == protowire.BytesType:
			value, _ = protowire.ConsumeBytes(entry[:vn])
		}
		entry = entry[vn:]
	}
	if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.Valid(key) {
		return name + " key"
	}
	path := name + "[" + strconv.FormatUint(keyNum, 10) + "]"
	if fd.MapKey().Kind() == protoreflect.StringKind {
		path = name + "[" + strconv.Quote(Truncate(string(key), 64)) + "]"
	}
	switch fd.MapValue().Kind() {
	case protoreflect.StringKind:
		if !utf8.Valid(value) {
			return path
		}
	case protoreflect.MessageKind:
		return wirePath(fd.MapValue().Message(), value, path+".", depth+1)
	}
	return ""
}
