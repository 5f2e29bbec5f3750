package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// errorBody is the one JSON shape of every error the edge answers.
type errorBody struct {
	// Code is the gRPC code's number, Status its canonical name ("INVALID_ARGUMENT").
	Code   int    `json:"code"`
	Status string `json:"status"`
	// Message is the service's public message.
	Message string `json:"message"`
	// FieldViolations name the request fields that were wrong (from a BadRequest detail).
	FieldViolations []fieldViolation `json:"field_violations,omitempty"`
	// RequestID is the request's X-Request-Id, to find it in every service's logs.
	RequestID string `json:"request_id,omitempty"`
	// Details are the status details as protojson (google.rpc types with their @type).
	Details []json.RawMessage `json:"details"`
}

type fieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

// errorHandler answers a failed call: the HTTP status of its gRPC code, errorBody, and a
// Retry-After header when the status carries a RetryInfo (rate limits).
func errorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	st := status.Convert(err)
	body := errorBody{Code: int(st.Code()), Status: codeName(st.Code()), Message: st.Message(), Details: []json.RawMessage{}}
	for _, d := range st.Proto().GetDetails() {
		if b, err := protojson.Marshal(d); err == nil {
			body.Details = append(body.Details, b)
		}
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				body.FieldViolations = append(body.FieldViolations, fieldViolation{Field: v.GetField(), Description: v.GetDescription()})
			}
		case *errdetails.RetryInfo:
			if secs := int64((d.GetRetryDelay().AsDuration() + time.Second - 1) / time.Second); secs > 0 {
				w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			}
		}
	}
	if st.Code() == codes.Unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="thefold"`)
	}
	writeBody(w, runtime.HTTPStatusFromCode(st.Code()), body)
}

// writeError answers an error of the edge itself (before any service) in errorBody's shape.
func writeError(w http.ResponseWriter, httpCode int, code codes.Code, msg string) {
	writeBody(w, httpCode, errorBody{Code: int(code), Status: codeName(code), Message: msg, Details: []json.RawMessage{}})
}

// codeName is a gRPC code's canonical name, e.g. "RESOURCE_EXHAUSTED".
func codeName(c codes.Code) string {
	if c == codes.OK {
		return "OK"
	}
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

func writeBody(w http.ResponseWriter, httpCode int, body errorBody) {
	body.RequestID = w.Header().Get("X-Request-Id")
	w.Header().Del("Content-Length")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpCode)
	_ = json.NewEncoder(w).Encode(body)
}
