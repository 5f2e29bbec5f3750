package docker

import (
	"fmt"
	"sync"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// output keeps the first max bytes of stdout and stderr together, counts the rest, and
// forwards the kept bytes to the streaming callback, with the same truncation marker as the
// other backends so callers see one format whichever backend ran the command.
type output struct {
	mu      sync.Mutex
	max     int64
	kept    int64
	buf     [3][]byte // indexed by stream (1 stdout, 2 stderr)
	dropped [3]int64
	stream  func(int, []byte)
	closed  bool
}

func newOutput(max int64, stream func(int, []byte)) *output {
	return &output{max: max, stream: stream}
}

// writer adapts one stream to io.Writer for stdcopy's demultiplexer. It never fails, so the
// flood past the cap is read and dropped rather than blocking the command on a full pipe.
func (o *output) writer(stream int) streamWriter { return streamWriter{o, stream} }

type streamWriter struct {
	o      *output
	stream int
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.o.write(w.stream, p)
	return len(p), nil
}

func (o *output) write(stream int, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := int64(len(p))
	if room := o.max - o.kept; n > room {
		o.dropped[stream] += n - room
		n = room
	}
	if n <= 0 {
		return
	}
	o.buf[stream] = append(o.buf[stream], p[:n]...)
	o.kept += n
	if o.stream != nil && !o.closed {
		o.stream(stream, p[:n])
	}
}

// finish appends the truncation markers, streams them, and stops the callback for good.
func (o *output) finish(res *backend.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for s := 1; s <= 2; s++ {
		if o.dropped[s] == 0 {
			continue
		}
		res.Truncated = true
		marker := fmt.Appendf(nil, "\n[… output truncated: %d bytes dropped]\n", o.dropped[s])
		o.buf[s] = append(o.buf[s], marker...)
		if o.stream != nil && !o.closed {
			o.stream(s, marker)
		}
	}
	o.closed = true
	res.Stdout, res.Stderr = o.buf[1], o.buf[2]
}
