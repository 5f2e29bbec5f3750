package mailer

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"

	gomail "github.com/wneessen/go-mail"
)

// smtpMailer submits mail to an SMTP server with go-mail, one connection per message:
// login codes are rare, and a fresh connection has no state to go stale.
type smtpMailer struct {
	from    string
	host    string
	tlsConf *tls.Config
	implTLS bool
	opts    []gomail.Option
}

func newSMTP(c Config) (*smtpMailer, error) {
	m := &smtpMailer{
		from:    c.From,
		host:    c.SMTPHost,
		tlsConf: &tls.Config{ServerName: c.SMTPHost, MinVersion: tls.VersionTLS12, RootCAs: c.rootCAs},
		implTLS: c.SMTPTLS == tlsImplicit,
	}
	m.opts = []gomail.Option{
		gomail.WithPort(c.SMTPPort),
		gomail.WithTimeout(c.SMTPTimeout),
		gomail.WithTLSConfig(m.tlsConf),
	}
	switch c.SMTPTLS {
	case tlsStartTLS:
		m.opts = append(m.opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case tlsImplicit:
		m.opts = append(m.opts, gomail.WithSSL())
	case tlsNone:
		m.opts = append(m.opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if c.SMTPUsername != "" {
		// PLAIN, which go-mail refuses over an unencrypted connection except to loopback.
		m.opts = append(m.opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain),
			gomail.WithUsername(c.SMTPUsername), gomail.WithPassword(c.SMTPPassword))
	}
	// Fail at start, not at the first login, if go-mail rejects the options.
	var stop func() bool
	if _, err := m.client(context.Background(), &stop); err != nil {
		return nil, err
	}
	return m, nil
}

// client returns a go-mail client for one send. go-mail watches ctx only while dialing, so
// its dialer also arranges for the connection to close when ctx ends; *stop undoes that.
func (m *smtpMailer) client(ctx context.Context, stop *func() bool) (*gomail.Client, error) {
	dial := func(dctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		var c net.Conn
		var err error
		if m.implTLS {
			c, err = (&tls.Dialer{NetDialer: &d, Config: m.tlsConf}).DialContext(dctx, network, addr)
		} else {
			c, err = d.DialContext(dctx, network, addr)
		}
		if err != nil {
			return nil, err
		}
		*stop = context.AfterFunc(ctx, func() { c.Close() })
		return c, nil
	}
	c, err := gomail.NewClient(m.host, append(slices.Clip(m.opts), gomail.WithDialContextFunc(dial))...)
	if err != nil {
		return nil, fmt.Errorf("mailer: smtp client: %w", err)
	}
	return c, nil
}

// Send submits msg. Cancelling ctx aborts the SMTP conversation at any point; each command
// is also bounded by SMTPTimeout.
func (m *smtpMailer) Send(ctx context.Context, msg Message) error {
	if err := msg.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mailer: %w", err)
	}
	gm := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	if err := gm.From(m.from); err != nil {
		return fmt.Errorf("mailer: From: %w", err)
	}
	if err := gm.To(msg.To); err != nil {
		return fmt.Errorf("mailer: %w: To: %w", ErrInvalidMessage, err)
	}
	gm.Subject(msg.Subject)
	gm.SetBodyString(gomail.TypeTextPlain, msg.Text)

	stop := func() bool { return false }
	client, err := m.client(ctx, &stop)
	if err != nil {
		return err
	}
	err = client.DialAndSendWithContext(ctx, gm)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		}
		return fmt.Errorf("mailer: smtp send via %s: %w", client.ServerAddr(), err)
	}
	return nil
}
