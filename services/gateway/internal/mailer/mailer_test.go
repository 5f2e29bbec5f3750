package mailer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/testenv"
)

func validSMTP() Config {
	return Config{
		Kind: "smtp", From: "TheFold <thefold@localhost>",
		SMTPHost: "smtp.example.com", SMTPPort: 587, SMTPTLS: "starttls", SMTPTimeout: 15 * time.Second,
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		modify func(*Config)
		want   []string // variables the error must name; none: valid
	}{
		{name: "smtp valid", modify: func(*Config) {}},
		{name: "log valid", modify: func(c *Config) { c.Kind, c.SMTPHost = "log", "" }},
		{name: "none with auth to loopback", modify: func(c *Config) {
			c.SMTPTLS, c.SMTPHost, c.SMTPUsername, c.SMTPPassword = "none", "127.0.0.1", "u", "p"
		}},
		{name: "unknown kind", modify: func(c *Config) { c.Kind = "sendmail" }, want: []string{"THEFOLD_MAILER"}},
		{name: "smtp without host", modify: func(c *Config) { c.SMTPHost = "" }, want: []string{"THEFOLD_SMTP_HOST"}},
		{name: "port zero", modify: func(c *Config) { c.SMTPPort = 0 }, want: []string{"THEFOLD_SMTP_PORT"}},
		{name: "port too big", modify: func(c *Config) { c.SMTPPort = 65536 }, want: []string{"THEFOLD_SMTP_PORT"}},
		{name: "bad TLS mode", modify: func(c *Config) { c.SMTPTLS = "ssl" }, want: []string{"THEFOLD_SMTP_TLS"}},
		{name: "bad From", modify: func(c *Config) { c.From = "thefold" }, want: []string{"THEFOLD_MAIL_FROM"}},
		{name: "From with CRLF", modify: func(c *Config) { c.From = "a@b.c\r\nBcc: x@y.z" }, want: []string{"THEFOLD_MAIL_FROM"}},
		{name: "zero timeout", modify: func(c *Config) { c.SMTPTimeout = 0 }, want: []string{"THEFOLD_SMTP_TIMEOUT"}},
		{name: "negative timeout", modify: func(c *Config) { c.SMTPTimeout = -time.Second }, want: []string{"THEFOLD_SMTP_TIMEOUT"}},
		{name: "plain auth without TLS to remote host", modify: func(c *Config) {
			c.SMTPTLS, c.SMTPUsername = "none", "u"
		}, want: []string{"THEFOLD_SMTP_USERNAME"}},
		{name: "password without username", modify: func(c *Config) { c.SMTPPassword = "p" }, want: []string{"THEFOLD_SMTP_PASSWORD"}},
		{name: "every problem at once", modify: func(c *Config) {
			c.SMTPHost, c.SMTPPort, c.SMTPTLS, c.From, c.SMTPTimeout = "", -1, "x", "", 0
		}, want: []string{"THEFOLD_SMTP_HOST", "THEFOLD_SMTP_PORT", "THEFOLD_SMTP_TLS", "THEFOLD_MAIL_FROM", "THEFOLD_SMTP_TIMEOUT"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := validSMTP()
			tc.modify(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors naming %v", tc.want)
			}
			if got := len(strings.Split(err.Error(), "\n")); got != len(tc.want) {
				t.Errorf("Validate() reported %d problems, want %d: %v", got, len(tc.want), err)
			}
			for _, v := range tc.want {
				if !strings.Contains(err.Error(), v+":") {
					t.Errorf("Validate() = %q, want it to name %s", err, v)
				}
			}
			if _, nerr := New(c, nil); nerr == nil {
				t.Errorf("New accepted a config Validate rejects")
			}
		})
	}
}

func TestConfigLoad(t *testing.T) {
	t.Parallel()
	var c Config
	if err := config.Load(context.Background(), &c, config.Map(nil, nil)); err != nil {
		t.Fatalf("Load(defaults): %v", err)
	}
	want := Config{Kind: "log", From: "TheFold <thefold@localhost>", SMTPPort: 587, SMTPTLS: "starttls", SMTPTimeout: 15 * time.Second}
	if c != want {
		t.Errorf("defaults = %+v, want %+v", c, want)
	}

	var bad Config
	err := config.Load(context.Background(), &bad, config.Map(map[string]string{
		"THEFOLD_MAILER": "smtp", "THEFOLD_SMTP_TLS": "bogus",
	}, nil))
	for _, v := range []string{"THEFOLD_SMTP_HOST", "THEFOLD_SMTP_TLS"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("Load(bad) = %v, want an error naming %s", err, v)
		}
	}

	c = validSMTP()
	c.SMTPUsername, c.SMTPPassword = "user", "hunter2"
	r := config.Redacted(c)
	if r["THEFOLD_SMTP_PASSWORD"] != "***" || r["THEFOLD_SMTP_USERNAME"] != "user" {
		t.Errorf("Redacted = %v, want the password masked and the username shown", r)
	}
}

// syncBuffer is a log destination the test reads while mailers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newLogMailer(t *testing.T, sink string) (Mailer, *syncBuffer) {
	t.Helper()
	var buf syncBuffer
	m, err := New(Config{Kind: "log", From: "TheFold <thefold@localhost>", SinkFile: sink,
		SMTPPort: 587, SMTPTLS: "starttls", SMTPTimeout: time.Second}, slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatalf("New(log): %v", err)
	}
	return m, &buf
}

func TestLogMailerSink(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "mail")
	sink := filepath.Join(dir, "sink.jsonl")
	m, logs := newLogMailer(t, sink)

	if _, err := ReadSink(sink); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadSink before any mail = %v, want fs.ErrNotExist", err)
	}
	want := []Message{
		{To: "ada@example.com", Subject: "Your TheFold login code", Text: "Your code is 314159.\nIt expires in 10 minutes."},
		{To: "Grace Hopper <grace@example.com>", Subject: "Anmeldecode — 271828", Text: "Code: 271828"},
		{To: "ada@example.com", Subject: "Your TheFold login code", Text: "Your code is 161803."},
	}
	for _, msg := range want {
		if err := m.Send(context.Background(), msg); err != nil {
			t.Fatalf("Send(%v): %v", msg, err)
		}
	}
	got, err := ReadSink(sink)
	if err != nil {
		t.Fatalf("ReadSink: %v", err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("ReadSink = %+v, want %+v", got, want)
	}
	// The log says a message went to the sink, never what it said.
	for _, code := range []string{"314159", "271828", "161803"} {
		if strings.Contains(logs.String(), code) {
			t.Errorf("log output shows code %s:\n%s", code, logs)
		}
	}
	if !strings.Contains(logs.String(), "mail (log mailer: not sent; written to the sink)") {
		t.Errorf("log output lacks the message line:\n%s", logs)
	}
	for path, mode := range map[string]fs.FileMode{sink: 0o600, dir: 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode = %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}

	// A line still being written is not a message yet.
	f, err := os.OpenFile(sink, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"time":"2026-01-01T00:00:00Z","to":"x@y.z","sub`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, err := ReadSink(sink); err != nil || len(got) != len(want) {
		t.Errorf("ReadSink with a partial last line = %d messages, %v; want %d, nil", len(got), err, len(want))
	}
}

func TestLogMailerConcurrent(t *testing.T) {
	t.Parallel()
	sink := filepath.Join(t.TempDir(), "sink.jsonl")
	m, _ := newLogMailer(t, sink)
	const n = 50
	// A long text makes interleaved writes visible if the lock were missing.
	pad := strings.Repeat("x", 8<<10)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- m.Send(context.Background(), Message{
				To: fmt.Sprintf("user%d@example.com", i), Subject: "code", Text: fmt.Sprintf("code %d %s", i, pad),
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
	}

	raw, err := os.ReadFile(sink)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("sink has %d lines, want %d", len(lines), n)
	}
	seen := map[string]bool{}
	for i, line := range lines {
		var rec map[string]string
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
		for _, k := range []string{"time", "to", "subject", "text"} {
			if rec[k] == "" {
				t.Errorf("line %d lacks %q: %v", i+1, k, rec)
			}
		}
		seen[rec["to"]] = true
	}
	for i := range n {
		if to := fmt.Sprintf("user%d@example.com", i); !seen[to] {
			t.Errorf("no message to %s", to)
		}
	}
	got, err := ReadSink(sink)
	if err != nil || len(got) != n {
		t.Errorf("ReadSink = %d messages, %v; want %d", len(got), err, n)
	}
}

func TestLogMailerWithoutSink(t *testing.T) {
	t.Parallel()
	m, logs := newLogMailer(t, "")
	if err := m.Send(context.Background(), Message{To: "a@example.com", Subject: "s", Text: "code 424242"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if strings.Contains(logs.String(), "424242") || !strings.Contains(logs.String(), "no THEFOLD_MAIL_SINK_FILE") {
		t.Errorf("without a sink, the log must say the mail was dropped and never show it:\n%s", logs)
	}
}

// badMessages are rejected by both mailers before anything is sent.
var badMessages = []struct {
	name  string
	msg   Message
	field string
}{
	{"empty To", Message{To: "", Subject: "s", Text: "t"}, "To"},
	{"To without domain", Message{To: "ada", Subject: "s", Text: "t"}, "To"},
	{"two recipients", Message{To: "a@example.com, b@example.com", Subject: "s", Text: "t"}, "To"},
	{"header injection in To", Message{To: "a@example.com\r\nBcc: evil@example.com", Subject: "s", Text: "t"}, "To"},
	{"empty Subject", Message{To: "a@example.com", Subject: " ", Text: "t"}, "Subject"},
	{"header injection in Subject", Message{To: "a@example.com", Subject: "hi\r\nBcc: evil@example.com", Text: "t"}, "Subject"},
	{"LF in Subject", Message{To: "a@example.com", Subject: "hi\nthere", Text: "t"}, "Subject"},
	{"invalid UTF-8 in Subject", Message{To: "a@example.com", Subject: "\xff", Text: "t"}, "Subject"},
	{"empty Text", Message{To: "a@example.com", Subject: "s", Text: ""}, "Text"},
	{"NUL in Text", Message{To: "a@example.com", Subject: "s", Text: "a\x00b"}, "Text"},
}

func TestSendRejectsBadMessages(t *testing.T) {
	t.Parallel()
	sink := filepath.Join(t.TempDir(), "sink.jsonl")
	logMailer, _ := newLogMailer(t, sink)
	srv := startSMTP(t, &backend{}, nil, false)
	smtpMailer, err := New(srv.config("none"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]Mailer{"log": logMailer, "smtp": smtpMailer} {
		for _, tc := range badMessages {
			err := m.Send(context.Background(), tc.msg)
			if !errors.Is(err, ErrInvalidMessage) || !strings.Contains(err.Error(), tc.field+":") {
				t.Errorf("%s: %s: Send = %v, want ErrInvalidMessage naming %s", name, tc.name, err, tc.field)
			}
		}
	}
	if _, err := ReadSink(sink); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("log mailer wrote a bad message to the sink (ReadSink: %v)", err)
	}
	if got := srv.be.messages(); len(got) != 0 {
		t.Errorf("SMTP server received %d bad messages", len(got))
	}
}

// received is one message an SMTP test server accepted.
type received struct {
	from string
	to   []string
	data []byte
	user string // authenticated user, if any
}

// backend is an in-process SMTP server's storage and behaviour.
type backend struct {
	user, pass string        // when set, AUTH PLAIN with these is required
	rejectRcpt bool          // answer 550 to RCPT
	stall      chan struct{} // when set, RCPT waits for it

	mu  sync.Mutex
	got []received
}

func (b *backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{b: b}, nil }

func (b *backend) messages() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

type session struct {
	b   *backend
	cur received
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.b.user || pass != s.b.pass {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "invalid credentials"}
		}
		s.cur.user = user
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.b.user != "" && s.cur.user == "" {
		return smtp.ErrAuthRequired
	}
	s.cur.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.b.stall != nil {
		<-s.b.stall
	}
	if s.b.rejectRcpt {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	s.cur.to = append(s.cur.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = data
	s.b.mu.Lock()
	s.b.got = append(s.b.got, s.cur)
	s.b.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.cur = received{user: s.cur.user} }
func (s *session) Logout() error { return nil }

type testServer struct {
	be   *backend
	port int
	pool *x509.CertPool // trusts the server's certificate, if it has one
}

// startSMTP serves be on 127.0.0.1. With cert the server offers STARTTLS, or, with implicit,
// speaks TLS from the first byte.
func startSMTP(t *testing.T, be *backend, cert *tls.Certificate, implicit bool) *testServer {
	t.Helper()
	s := smtp.NewServer(be)
	s.Domain = "localhost"
	s.AllowInsecureAuth = true
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	s.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{be: be, port: l.Addr().(*net.TCPAddr).Port}
	if cert != nil {
		tc := &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12}
		if implicit {
			l = tls.NewListener(l, tc)
		} else {
			s.TLSConfig = tc
		}
		ts.pool = x509.NewCertPool()
		ts.pool.AddCert(cert.Leaf)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	if be.stall != nil {
		t.Cleanup(func() { close(be.stall) }) // runs before Close
	}
	return ts
}

func (ts *testServer) config(mode string) Config {
	return Config{
		Kind: "smtp", From: "TheFold <thefold@localhost>", SMTPHost: "127.0.0.1", SMTPPort: ts.port,
		SMTPTLS: mode, SMTPTimeout: 10 * time.Second, rootCAs: ts.pool,
	}
}

// selfSigned returns a certificate for 127.0.0.1 that nothing trusts by default.
func selfSigned(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mailer test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// checkDelivered asserts the server holds exactly msg, from the configured sender.
func checkDelivered(t *testing.T, be *backend, msg Message, user string) {
	t.Helper()
	got := be.messages()
	if len(got) != 1 {
		t.Fatalf("server received %d messages, want 1", len(got))
	}
	r := got[0]
	to, err := mail.ParseAddress(msg.To)
	if err != nil {
		t.Fatal(err)
	}
	if r.from != "thefold@localhost" || !slices.Equal(r.to, []string{to.Address}) || r.user != user {
		t.Errorf("envelope = from %q to %q user %q, want from thefold@localhost to [%s] user %q", r.from, r.to, r.user, to.Address, user)
	}
	m, err := mail.ReadMessage(bytes.NewReader(r.data))
	if err != nil {
		t.Fatalf("parse message: %v\n%s", err, r.data)
	}
	from, err := m.Header.AddressList("From")
	if err != nil || len(from) != 1 || from[0].Address != "thefold@localhost" || from[0].Name != "TheFold" {
		t.Errorf("From = %v, %v; want TheFold <thefold@localhost>", from, err)
	}
	hto, err := m.Header.AddressList("To")
	if err != nil || len(hto) != 1 || hto[0].Address != to.Address {
		t.Errorf("To = %v, %v; want %s", hto, err, to.Address)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil || subject != msg.Subject {
		t.Errorf("Subject = %q, %v; want %q", subject, err, msg.Subject)
	}
	if ct := m.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain", ct)
	}
	var body io.Reader = m.Body
	if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimRight(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n"); got != msg.Text {
		t.Errorf("body = %q, want %q", got, msg.Text)
	}
}

var loginMail = Message{
	To:      "Ada Lovelace <ada@example.com>",
	Subject: "Your TheFold login code — 314159",
	Text:    "Your login code is 314159.\nIt expires in 10 minutes; a line long enough to be wrapped by quoted-printable encoding, which folds at 76 characters.",
}

func TestSMTPDelivers(t *testing.T) {
	t.Parallel()
	cert := selfSigned(t)
	cases := []struct {
		name     string
		cert     *tls.Certificate
		implicit bool
		mode     string
		user     string
	}{
		{name: "none", mode: "none"},
		{name: "none with PLAIN to loopback", mode: "none", user: "thefold"},
		{name: "starttls", cert: cert, mode: "starttls"},
		{name: "starttls with PLAIN", cert: cert, mode: "starttls", user: "thefold"},
		{name: "implicit tls with PLAIN", cert: cert, implicit: true, mode: "tls", user: "thefold"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			be := &backend{user: tc.user, pass: "s3cret"}
			srv := startSMTP(t, be, tc.cert, tc.implicit)
			c := srv.config(tc.mode)
			if tc.user != "" {
				c.SMTPUsername, c.SMTPPassword = tc.user, "s3cret"
			}
			m, err := New(c, nil)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := m.Send(context.Background(), loginMail); err != nil {
				t.Fatalf("Send: %v", err)
			}
			checkDelivered(t, be, loginMail, tc.user)
		})
	}
}

func TestSMTPConcurrent(t *testing.T) {
	t.Parallel()
	be := &backend{}
	m, err := New(startSMTP(t, be, selfSigned(t), false).config("starttls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- m.Send(context.Background(), Message{To: fmt.Sprintf("user%d@example.com", i), Subject: "code", Text: "code"})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Send: %v", err)
		}
	}
	if got := len(be.messages()); got != n {
		t.Errorf("server received %d messages, want %d", got, n)
	}
}

func TestSMTPFailures(t *testing.T) {
	t.Parallel()
	cert := selfSigned(t)
	cases := []struct {
		name     string
		be       *backend
		cert     *tls.Certificate
		implicit bool
		config   func(*Config)
		want     string
	}{
		{name: "RCPT refused", be: &backend{rejectRcpt: true}, config: func(*Config) {}, want: "550"},
		{name: "wrong password", be: &backend{user: "thefold", pass: "s3cret"}, config: func(c *Config) {
			c.SMTPUsername, c.SMTPPassword = "thefold", "wrong"
		}, want: "535"},
		{name: "starttls required, not offered", be: &backend{}, config: func(c *Config) { c.SMTPTLS = "starttls" }, want: "STARTTLS"},
		{name: "untrusted certificate", be: &backend{}, cert: cert, config: func(c *Config) {
			c.SMTPTLS, c.rootCAs = "starttls", nil
		}, want: "certificate"},
		{name: "untrusted certificate, implicit tls", be: &backend{}, cert: cert, implicit: true, config: func(c *Config) {
			c.SMTPTLS, c.rootCAs = "tls", nil
		}, want: "certificate"},
		{name: "nobody listening", be: &backend{}, config: func(c *Config) { c.SMTPPort = closedPort(t) }, want: "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startSMTP(t, tc.be, tc.cert, tc.implicit)
			c := srv.config("none")
			tc.config(&c)
			m, err := New(c, nil)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			err = m.Send(context.Background(), loginMail)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Send = %v, want an error mentioning %q", err, tc.want)
			}
			if errors.Is(err, ErrInvalidMessage) {
				t.Errorf("a delivery failure matches ErrInvalidMessage: %v", err)
			}
			if got := tc.be.messages(); len(got) != 0 {
				t.Errorf("server received %d messages", len(got))
			}
		})
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(testenv.RefusedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSMTPContext(t *testing.T) {
	t.Parallel()
	t.Run("already cancelled", func(t *testing.T) {
		t.Parallel()
		be := &backend{}
		m, err := New(startSMTP(t, be, nil, false).config("none"), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		err = m.Send(ctx, loginMail)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Send = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Send took %s with a cancelled context", d)
		}
		if len(be.messages()) != 0 {
			t.Errorf("server received a message")
		}
	})
	t.Run("deadline while the server stalls", func(t *testing.T) {
		t.Parallel()
		be := &backend{stall: make(chan struct{})}
		m, err := New(startSMTP(t, be, nil, false).config("none"), nil) // SMTPTimeout 10s
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = m.Send(ctx, loginMail)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Send = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Send took %s, want it to stop soon after the 200ms deadline", d)
		}
	})
}
