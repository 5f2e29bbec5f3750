package backend

import (
	"fmt"
	"io"
	"sync"
)

// output keeps the first max bytes of stdout and stderr together, counts the rest, and
// forwards the kept bytes to the streaming callback. One mutex serialises both streams so
// the callback is never called concurrently, and closed stops it for good once Run returns.
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

// drain copies r into stream until EOF or a read error (the read end closed under it).
func (o *output) drain(stream int, r io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			o.write(stream, b[:n])
		}
		if err != nil {
			return
		}
	}
}

// finish appends the truncation markers, streams them, and stops the callback.
func (o *output) finish(res *Result) {
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
