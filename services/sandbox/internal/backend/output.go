package backend

import (
	"fmt"
	"io"
	"sync"
)

// Output keeps the first max bytes of stdout and stderr together, counts the rest, and
// forwards the kept bytes to the streaming callback, with one truncation marker for every
// backend. One mutex serialises both streams so the callback is never called concurrently,
// and closed stops it for good once Run returns.
type Output struct {
	mu      sync.Mutex
	max     int64
	kept    int64
	buf     [3][]byte // indexed by stream (1 stdout, 2 stderr)
	dropped [3]int64
	stream  func(int, []byte)
	closed  bool
}

// NewOutput keeps max bytes and streams them to stream (which may be nil).
func NewOutput(max int64, stream func(int, []byte)) *Output {
	return &Output{max: max, stream: stream}
}

// Writer adapts one stream (1 stdout, 2 stderr) to io.Writer. It never fails, so the flood
// past the cap is read and dropped rather than blocking the command on a full pipe.
func (o *Output) Writer(stream int) io.Writer { return streamWriter{o, stream} }

type streamWriter struct {
	o      *Output
	stream int
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.o.Write(w.stream, p)
	return len(p), nil
}

// Write keeps what fits of p on stream and counts the rest.
func (o *Output) Write(stream int, p []byte) {
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

// Drain copies r into stream until EOF or a read error (the read end closed under it).
func (o *Output) Drain(stream int, r io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			o.Write(stream, b[:n])
		}
		if err != nil {
			return
		}
	}
}

// Finish appends the truncation markers, streams them, and stops the callback for good.
func (o *Output) Finish(res *Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for s := 1; s <= 2; s++ {
		if o.dropped[s] == 0 {
			continue
		}
		res.Truncated = true
		marker := []byte(fmt.Sprintf("\n[… output truncated: %d bytes dropped]\n", o.dropped[s]))
		o.buf[s] = append(o.buf[s], marker...)
		if o.stream != nil && !o.closed {
			o.stream(s, marker)
		}
	}
	o.closed = true
	res.Stdout, res.Stderr = o.buf[1], o.buf[2]
}
