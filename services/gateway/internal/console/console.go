// Package console is TheFold's web console: a small single-page application embedded in the
// gateway's binary and served on the REST port at / (the API stays under /v1), plus the
// three session routes a browser needs and a curl user does not.
//
// The page uses the same REST API as any client, with a bearer access token it keeps in
// memory only: nothing the console can do bypasses the API's checks, and no cookie ever
// authenticates an API call. The one cookie is the session's refresh token, HttpOnly (a
// script cannot read it), Secure and SameSite=Strict, read only by the session routes,
// which also demand a header a cross-site form cannot send (X-TheFold-Console) and refuse a
// request whose Origin or Sec-Fetch-Site says it came from another site. The assets carry a
// strict Content-Security-Policy: scripts and styles from the gateway's own origin only, no
// inline script, no framing.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
)

//go:embed static
var static embed.FS

// CookieName is the session cookie: the refresh token. The __Host- prefix makes the browser
// insist on Secure, Path=/ and no Domain, so no other host can set or shadow it.
const CookieName = "__Host-thefold-session"

// CSRFHeader must be on every session request: a cross-site form cannot set a header, and a
// cross-site script that sets one needs a CORS preflight the edge does not grant.
const CSRFHeader = "X-TheFold-Console"

// CSP is the console's Content-Security-Policy: everything from its own origin only, no
// inline script or style, no plugins, no framing, no base or form target elsewhere.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Pages are the console's routes: each answers the application's page, which renders the
// route itself. Anything else that is not /v1/… is the API's 404.
var Pages = []string{"/{$}", "/signin", "/tasks", "/tasks/{id}", "/jobs/{id}", "/reviews/{id}", "/chat", "/chat/{id}", "/projects", "/projects/{id}", "/memory", "/repos", "/repos/{owner}/{name}", "/repos/{owner}/{name}/pulls/{number}", "/models", "/settings", "/usage", "/skills"}

// ErrorWriter answers a failed session request in the API's one error shape.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error)

// Handler serves the console: register Routes on a mux.
type Handler struct {
	auth     gatewayv1.AuthServiceClient
	writeErr ErrorWriter
	now      func() time.Time
	index    []byte
	assets   fs.FS
}

// New returns the console over the gateway's AuthService (a connection to the gateway's own
// gRPC server, so the session routes are subject to the same checks and limits as the
// API's: the login lockout, the refresh token's rotation and theft detection).
func New(conn grpc.ClientConnInterface, writeErr ErrorWriter) (*Handler, error) {
	assets, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	index, err := fs.ReadFile(assets, "index.html")
	if err != nil {
		return nil, err
	}
	return &Handler{auth: gatewayv1.NewAuthServiceClient(conn), writeErr: writeErr, now: time.Now, index: index, assets: assets}, nil
}

// Routes are the console's patterns (net/http ServeMux syntax) and their handlers.
func (h *Handler) Routes() map[string]http.Handler {
	routes := map[string]http.Handler{
		"GET /assets/{file}":             http.HandlerFunc(h.asset),
		"POST /console/session":          h.session(h.signIn),
		"POST /console/session/refresh":  h.session(h.refresh),
		"POST /console/session/sign-out": h.session(h.signOut),
	}
	for _, p := range Pages {
		routes["GET "+p] = http.HandlerFunc(h.page)
	}
	return routes
}

// pageHeaders are set on the page and every asset.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(h.index)
}

func (h *Handler) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "index.html" || strings.ContainsAny(name, "/\\") || !fs.ValidPath(name) {
		h.writeErr(w, r, status.Error(codes.NotFound, "no such asset"))
		return
	}
	b, err := fs.ReadFile(h.assets, name)
	if err != nil {
		h.writeErr(w, r, status.Errorf(codes.NotFound, "no asset %q", name))
		return
	}
	pageHeaders(w)
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	// The assets change with the binary: revalidate rather than cache for long.
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// session wraps a session route: the cross-site checks first, then the route.
func (h *Handler) session(next func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := sameSite(r); err != nil {
			h.writeErr(w, r, err)
			return
		}
		if err := next(w, r); err != nil {
			h.writeErr(w, r, err)
		}
	})
}

// sameSite refuses a session request that a page of another site could have made.
func sameSite(r *http.Request) error {
	if r.Header.Get(CSRFHeader) != "1" {
		return status.Errorf(codes.PermissionDenied, "the %s: 1 header is required on console session requests", CSRFHeader)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return status.Errorf(codes.PermissionDenied, "a console session request must come from the console's own origin (Sec-Fetch-Site: %s)", site)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return status.Error(codes.PermissionDenied, "a console session request must come from the console's own origin (Origin)")
		}
	}
	return nil
}

// signInRequest is POST /console/session's body.
type signInRequest struct {
	Email string `json:"email"`
	Code  string `json:"code"`
}

// sessionResponse is what the page gets from every session route: the access token and when
// it expires (never the refresh token, which only the cookie holds), and the user on sign-in.
type sessionResponse struct {
	AccessToken      string          `json:"access_token"`
	AccessExpireTime string          `json:"access_expire_time"`
	User             json.RawMessage `json:"user,omitempty"`
}

func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) error {
	var in signInRequest
	if err := decode(r, &in); err != nil {
		return err
	}
	resp, err := h.auth.VerifyLoginCode(outgoing(r), &gatewayv1.VerifyLoginCodeRequest{Email: in.Email, Code: in.Code})
	if err != nil {
		return err
	}
	user, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(resp.GetUser())
	if err != nil {
		return status.Errorf(codes.Internal, "user: %v", err)
	}
	return h.answer(w, resp.GetTokens(), user)
}

func (h *Handler) refresh(w http.ResponseWriter, r *http.Request) error {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return status.Error(codes.Unauthenticated, "no console session: sign in")
	}
	resp, err := h.auth.RefreshToken(outgoing(r), &gatewayv1.RefreshTokenRequest{RefreshToken: c.Value})
	if err != nil {
		if status.Code(err) == codes.Unauthenticated {
			clearCookie(w)
		}
		return err
	}
	return h.answer(w, resp.GetTokens(), nil)
}

// signOut ends the session: the refresh token is revoked, which refuses the session's
// access tokens from then on, and the cookie is cleared. It needs the page's access token
// (RevokeToken acts for the caller); without a valid one the cookie is still cleared and
// the refresh token expires unused.
func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) error {
	c, err := r.Cookie(CookieName)
	clearCookie(w)
	if err != nil || c.Value == "" {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if _, err := h.auth.RevokeToken(outgoing(r), &gatewayv1.RevokeTokenRequest{Token: c.Value}); err != nil && status.Code(err) != codes.Unauthenticated {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// answer sets the session cookie to the pair's refresh token and answers its access token.
func (h *Handler) answer(w http.ResponseWriter, tokens *gatewayv1.TokenPair, user json.RawMessage) error {
	if tokens.GetAccessToken() == "" || tokens.GetRefreshToken() == "" {
		return status.Error(codes.Internal, "the login answered no tokens")
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: tokens.GetRefreshToken(), Path: "/",
		Expires: expiry(tokens.GetRefreshExpireTime()), MaxAge: maxAge(h.now(), tokens.GetRefreshExpireTime()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(sessionResponse{
		AccessToken:      tokens.GetAccessToken(),
		AccessExpireTime: tokens.GetAccessExpireTime().AsTime().UTC().Format(time.RFC3339Nano),
		User:             user,
	})
}

func clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

func expiry(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func maxAge(now time.Time, t *timestamppb.Timestamp) int {
	if t == nil {
		return 0 // a session cookie
	}
	return max(int(t.AsTime().Sub(now)/time.Second), 1)
}

// decode reads a JSON body into v, refusing unknown fields and trailing data, and names
// the missing fields.
func decode(r *http.Request, v *signInRequest) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return status.Error(codes.InvalidArgument, "the body must be a JSON object with email and code")
		}
		return status.Errorf(codes.InvalidArgument, "body: %v", err)
	}
	if dec.More() {
		return status.Error(codes.InvalidArgument, "body: one JSON object expected")
	}
	for _, f := range []struct{ name, val string }{{"email", v.Email}, {"code", v.Code}} {
		if strings.TrimSpace(f.val) == "" {
			return errs.Invalid(f.name, "required")
		}
	}
	return nil
}

// outgoing is the request's context with what the services are told of it: the client's
// address (the edge has already made RemoteAddr the client's own), the request id, and the
// page's bearer token when it sent one.
func outgoing(r *http.Request) context.Context {
	md := metadata.MD{}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		md.Set("x-forwarded-for", host)
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		md.Set("x-request-id", id)
	}
	if a := r.Header.Get("Authorization"); a != "" {
		md.Set("authorization", a)
	}
	return metadata.NewOutgoingContext(r.Context(), md)
}
