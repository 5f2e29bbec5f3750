package mailer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// logMailer sends nothing: it appends each message to a sink file (0600, in a 0700
// directory) for the person running TheFold locally to read the code, and logs that it did,
// never the message's subject or text: a login code in a log file is a login for anyone
// who can read the logs.
type logMailer struct {
	log  *slog.Logger
	sink string
	// mu makes each line one write that no other send interleaves with.
	mu sync.Mutex
}

// sinkRecord is one line of the sink file.
type sinkRecord struct {
	Time    time.Time `json:"time"`
	To      string    `json:"to"`
	Subject string    `json:"subject"`
	Text    string    `json:"text"`
}

func newLog(c Config, log *slog.Logger) (*logMailer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if c.SinkFile != "" {
		if err := os.MkdirAll(filepath.Dir(c.SinkFile), 0o700); err != nil {
			return nil, fmt.Errorf("mailer: sink directory: %w", err)
		}
	}
	log.Warn("mailer: log mailer in use, mail is not sent but written to the sink", "sink", c.SinkFile)
	return &logMailer{log: log, sink: c.SinkFile}, nil
}

// Send logs m and appends it to the sink file, if any.
func (l *logMailer) Send(ctx context.Context, m Message) error {
	if err := m.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mailer: %w", err)
	}
	if l.sink == "" {
		l.log.WarnContext(ctx, "mail (log mailer: not sent, and dropped: no THEFOLD_MAIL_SINK_FILE to read it from)", "to", m.To)
		return nil
	}
	l.log.InfoContext(ctx, "mail (log mailer: not sent; written to the sink)", "to", m.To, "sink", l.sink)
	line, err := json.Marshal(sinkRecord{Time: time.Now().UTC(), To: m.To, Subject: m.Subject, Text: m.Text})
	if err != nil {
		return fmt.Errorf("mailer: encode sink record: %w", err)
	}
	line = append(line, '\n')

	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.sink, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("mailer: open sink: %w", err)
	}
	_, werr := f.Write(line)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("mailer: append to sink: %w", err)
	}
	return nil
}

// ReadSink reads the messages a log mailer appended to path, oldest first (tests read login
// codes from it). A line still being written (no newline yet) is left for the next read.
// Before the first message the file does not exist: the error then matches fs.ErrNotExist.
func ReadSink(path string) ([]Message, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("mailer: read sink: %w", err)
	}
	defer f.Close()
	var out []Message
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("mailer: read sink %s: %w", path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec sinkRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("mailer: read sink %s: line %d: %w", path, n, err)
		}
		out = append(out, Message{To: rec.To, Subject: rec.Subject, Text: rec.Text})
	}
}
