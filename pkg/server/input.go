package server

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec wrapped below
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/validate"
)

// Bad bytes in a request are bad input, never Internal. Two places see them:
//
//   - Strings that are not UTF-8 never reach a handler: proto.Unmarshal refuses them, and
//     grpc-go turns any codec error into INTERNAL "grpc: failed to unmarshal …" before an
//     interceptor runs. inputCodec therefore does not fail: it leaves the request empty
//     with a marker (an unknown field) saying which field was bad, and the interceptor
//     below answers INVALID_ARGUMENT naming it.
//   - NUL bytes are valid UTF-8 but no service can store them (PostgreSQL refuses NUL in
//     text): the interceptor walks every string of the request (validate.Strings).

// badInputField is the field number of the marker: the largest there is, which no TheFold
// message uses. Its value is "<field path>\x00<reason>".
const badInputField protowire.Number = protowire.MaxValidNumber

type inputCodec struct{ encoding.CodecV2 }

func newInputCodec() encoding.CodecV2 {
	return inputCodec{encoding.GetCodecV2("proto")}
}

func (c inputCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		if m1, ok1 := v.(protoadapt.MessageV1); ok1 {
			m, ok = protoadapt.MessageV2Of(m1), true
		}
	}
	if !ok {
		return err
	}
	desc := m.ProtoReflect().Descriptor()
	path, reason := validate.InvalidUTF8Path(desc, data.Materialize()), "not valid UTF-8"
	if path == "" {
		path, reason = "request", "not a valid "+string(desc.FullName())+" message"
	}
	proto.Reset(m)
	var mark []byte
	mark = protowire.AppendTag(mark, badInputField, protowire.BytesType)
	mark = protowire.AppendString(mark, path+"\x00"+reason)
	m.ProtoReflect().SetUnknown(mark)
	return nil
}

// checkInput returns InvalidArgument for a request marked by inputCodec or holding a NUL
// byte or invalid UTF-8 in any string.
func checkInput(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	unknown := m.ProtoReflect().GetUnknown()
	for len(unknown) > 0 {
		num, typ, n := protowire.ConsumeField(unknown)
		if n < 0 {
			break
		}
		if num == badInputField && typ == protowire.BytesType {
			_, _, tn := protowire.ConsumeTag(unknown)
			v, _ := protowire.ConsumeBytes(unknown[tn:n])
			path, reason, _ := strings.Cut(string(v), "\x00")
			return errs.Invalid(path, "%s", reason)
		}
		unknown = unknown[n:]
	}
	return validate.Strings(m)
}

// inputUnary runs checkInput before the handler.
func inputUnary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := checkInput(req); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// inputStream runs checkInput on every message the handler receives.
func inputStream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return h(srv, inputServerStream{ss})
	}
}

type inputServerStream struct{ grpc.ServerStream }

func (s inputServerStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return checkInput(m)
}
