// Package mailer sends the gateway's e-mail — one-time login codes — through an SMTP server
// or, for local use, to the log (and optionally a JSON-lines sink file that tests read).
package mailer

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Message is one e-mail.
type Message struct {
	To      string
	Subject string
	Text    string // plain-text body
}

// Mailer sends mail.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// ErrInvalidMessage is wrapped by Send's error when the message itself is bad (recipient,
// subject or text), as opposed to a failure to deliver it: callers map it to InvalidArgument.
var ErrInvalidMessage = errors.New("invalid message")

// Values of Config.Kind and Config.SMTPTLS.
const (
	kindLog  = "log"
	kindSMTP = "smtp"

	tlsStartTLS = "starttls" // STARTTLS, required
	tlsImplicit = "tls"      // implicit TLS (SMTPS, usually port 465)
	tlsNone     = "none"     // plain text: only for a relay on loopback or a trusted network
)

// Config selects and configures the mailer.
type Config struct {
	Kind string `env:"THEFOLD_MAILER, default=log"` // "log" or "smtp"
	From string `env:"THEFOLD_MAIL_FROM, default=TheFold <thefold@localhost>"`
	// SinkFile is where the log mailer also appends each message as one JSON line (0600),
	// for local use and tests; see ReadSink.
	SinkFile     string        `env:"THEFOLD_MAIL_SINK_FILE"`
	SMTPHost     string        `env:"THEFOLD_SMTP_HOST"`
	SMTPPort     int           `env:"THEFOLD_SMTP_PORT, default=587"`
	SMTPUsername string        `env:"THEFOLD_SMTP_USERNAME"`
	SMTPPassword string        `env:"THEFOLD_SMTP_PASSWORD" secret:"true"`
	SMTPTLS      string        `env:"THEFOLD_SMTP_TLS, default=starttls"` // "starttls", "tls" or "none"
	SMTPTimeout  time.Duration `env:"THEFOLD_SMTP_TIMEOUT, default=15s"`

	// rootCAs replaces the system roots for verifying the SMTP server; tests set it to
	// trust a self-signed certificate. Never loaded from the environment.
	rootCAs *x509.CertPool
}

// Validate reports every problem with the configuration, naming the variable.
func (c *Config) Validate() error {
	var errs []error
	switch c.Kind {
	case kindLog:
	case kindSMTP:
		if c.SMTPHost == "" {
			errs = append(errs, errors.New("THEFOLD_SMTP_HOST: required when THEFOLD_MAILER=smtp"))
		}
	default:
		errs = append(errs, fmt.Errorf("THEFOLD_MAILER: must be %q or %q, got %q", kindLog, kindSMTP, c.Kind))
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		errs = append(errs, fmt.Errorf("THEFOLD_MAIL_FROM: not an e-mail address %q: %v", c.From, err))
	}
	if c.SMTPPort < 1 || c.SMTPPort > 65535 {
		errs = append(errs, fmt.Errorf("THEFOLD_SMTP_PORT: must be 1-65535, got %d", c.SMTPPort))
	}
	switch c.SMTPTLS {
	case tlsStartTLS, tlsImplicit:
	case tlsNone:
		// go-mail sends PLAIN credentials in clear text only to a loopback host; say so at
		// start rather than at the first login.
		if c.SMTPUsername != "" && !isLoopbackHost(c.SMTPHost) {
			errs = append(errs, fmt.Errorf("THEFOLD_SMTP_USERNAME: authentication needs TLS: THEFOLD_SMTP_TLS=none allows it only to a loopback host, not %q", c.SMTPHost))
		}
	default:
		errs = append(errs, fmt.Errorf("THEFOLD_SMTP_TLS: must be %q, %q or %q, got %q", tlsStartTLS, tlsImplicit, tlsNone, c.SMTPTLS))
	}
	if c.SMTPPassword != "" && c.SMTPUsername == "" {
		errs = append(errs, errors.New("THEFOLD_SMTP_PASSWORD: set without THEFOLD_SMTP_USERNAME"))
	}
	if c.SMTPTimeout <= 0 {
		errs = append(errs, fmt.Errorf("THEFOLD_SMTP_TIMEOUT: must be positive, got %s", c.SMTPTimeout))
	}
	return errors.Join(errs...)
}

// isLoopbackHost matches the hosts go-mail's PLAIN authentication accepts without TLS.
func isLoopbackHost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// New returns the mailer c selects. It validates c first.
func New(c Config, log *slog.Logger) (Mailer, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("mailer: %w", err)
	}
	if c.Kind == kindSMTP {
		return newSMTP(c)
	}
	return newLog(c, log)
}

// validate checks a message before either mailer handles it. The header fields must not
// carry control characters (CR/LF would inject headers); net/mail rejects them in To.
func (m Message) validate() error {
	var errs []error
	if _, err := mail.ParseAddress(m.To); err != nil {
		errs = append(errs, fmt.Errorf("To: not an e-mail address %q: %v", m.To, err))
	}
	switch {
	case strings.TrimSpace(m.Subject) == "":
		errs = append(errs, errors.New("Subject: empty"))
	case !utf8.ValidString(m.Subject):
		errs = append(errs, errors.New("Subject: invalid UTF-8"))
	case strings.IndexFunc(m.Subject, unicode.IsControl) >= 0:
		errs = append(errs, errors.New("Subject: contains a control character (CR, LF, …)"))
	}
	switch {
	case strings.TrimSpace(m.Text) == "":
		errs = append(errs, errors.New("Text: empty"))
	case !utf8.ValidString(m.Text):
		errs = append(errs, errors.New("Text: invalid UTF-8"))
	case strings.ContainsRune(m.Text, 0):
		errs = append(errs, errors.New("Text: contains NUL"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mailer: %w: %w", ErrInvalidMessage, err)
	}
	return nil
}
