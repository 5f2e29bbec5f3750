// Package modelfile reads and writes the word-vector model of the local@2 embedder: the
// trainer writes it, pkg/embed embeds and reads it. The format is gzip over a fixed
// layout closed by a SHA-256 of everything before it, so a truncated or altered file is
// refused with an error instead of giving quietly wrong vectors.
package modelfile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// magic starts the uncompressed body; its last byte is the layout's version.
const magic = "TFWVEC\x00\x01"

// Header describes a model. It is stored as JSON so fields can be added.
type Header struct {
	Version string `json:"version"` // the embedder version it is for: "local@2"
	Words   int    `json:"words"`   // vocabulary size
	Dims    int    `json:"dims"`    // vector size
	// Manifest is the SHA-256 of the training manifest: the same manifest gives the same
	// model, byte for byte.
	Manifest string `json:"manifest_sha256"`
	Tokens   int64  `json:"tokens"` // corpus size in words
	// Training settings, for the record.
	Window    int     `json:"window"`
	Smoothing float64 `json:"context_smoothing"`
	EigenPow  float64 `json:"eigen_power"`
	// PairWeight is the co-occurrence weight of a documented function's (doc comment
	// word, code word) pairs.
	PairWeight float64 `json:"pair_weight,omitempty"`
}

// Model is word vectors, int8-quantised per row: vector i is Vec[i*Dims:(i+1)*Dims]
// times Scale[i].
type Model struct {
	Header
	Words   []string  // by descending frequency
	LogProb []float32 // natural log of each word's share of the corpus
	Scale   []float32
	Vec     []int8
	// Common is the corpus's common direction (the first principal component of the
	// frequency-weighted word vectors); text vectors have it removed.
	Common []float32
}

// Validate checks that the parts agree with the header.
func (m *Model) Validate() error {
	n, d := m.Header.Words, m.Dims
	switch {
	case n <= 0 || d <= 0:
		return fmt.Errorf("header has %d words of %d dimensions", n, d)
	case len(m.Words) != n || len(m.LogProb) != n || len(m.Scale) != n:
		return fmt.Errorf("header says %d words, body has %d words, %d frequencies, %d scales", n, len(m.Words), len(m.LogProb), len(m.Scale))
	case len(m.Vec) != n*d:
		return fmt.Errorf("header says %d×%d vector components, body has %d", n, d, len(m.Vec))
	case len(m.Common) != d:
		return fmt.Errorf("common direction has %d dimensions, want %d", len(m.Common), d)
	}
	return nil
}

// Encode writes m. The output depends only on m (gzip without a name or time).
func Encode(w io.Writer, m *Model) error {
	if err := m.Validate(); err != nil {
		return err
	}
	hdr, err := json.Marshal(m.Header)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	body.WriteString(magic)
	putU32 := func(x uint32) { body.Write(binary.LittleEndian.AppendUint32(nil, x)) }
	putU32(uint32(len(hdr)))
	body.Write(hdr)
	for _, s := range m.Words {
		body.Write(binary.AppendUvarint(nil, uint64(len(s))))
		body.WriteString(s)
	}
	for _, fs := range [][]float32{m.LogProb, m.Scale, m.Common} {
		for _, f := range fs {
			putU32(math.Float32bits(f))
		}
	}
	for _, x := range m.Vec {
		body.WriteByte(byte(x))
	}
	sum := sha256.Sum256(body.Bytes())
	body.Write(sum[:])

	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(body.Bytes()); err != nil {
		return err
	}
	return zw.Close()
}

// ErrCorrupt is wrapped by every error Decode returns for bad bytes.
var ErrCorrupt = errors.New("corrupt word-vector model")

// Decode reads a model Encode wrote, checking its checksum and layout.
func Decode(r io.Reader) (*Model, error) {
	zr, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(data) < len(magic)+4+sha256.Size || string(data[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: not a model file (or an unknown layout version)", ErrCorrupt)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	m, err := parse(body[len(magic):])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return m, nil
}

func parse(b []byte) (*Model, error) {
	short := errors.New("body ends early")
	take := func(n int) ([]byte, error) {
		if n < 0 || n > len(b) {
			return nil, short
		}
		p := b[:n]
		b = b[n:]
		return p, nil
	}
	p, err := take(4)
	if err != nil {
		return nil, err
	}
	hdr, err := take(int(binary.LittleEndian.Uint32(p)))
	if err != nil {
		return nil, err
	}
	m := &Model{}
	if err := json.Unmarshal(hdr, &m.Header); err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	n, d := m.Header.Words, m.Dims
	if n <= 0 || d <= 0 || n > 1<<24 || d > 1<<12 {
		return nil, fmt.Errorf("header has %d words of %d dimensions", n, d)
	}
	m.Words = make([]string, n)
	for i := range m.Words {
		l, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, short
		}
		b = b[k:]
		s, err := take(int(l))
		if err != nil {
			return nil, err
		}
		m.Words[i] = string(s)
	}
	floats := func(k int) ([]float32, error) {
		p, err := take(4 * k)
		if err != nil {
			return nil, err
		}
		out := make([]float32, k)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		}
		return out, nil
	}
	if m.LogProb, err = floats(n); err != nil {
		return nil, err
	}
	if m.Scale, err = floats(n); err != nil {
		return nil, err
	}
	if m.Common, err = floats(d); err != nil {
		return nil, err
	}
	p, err = take(n * d)
	if err != nil {
		return nil, err
	}
	m.Vec = make([]int8, n*d)
	for i, x := range p {
		m.Vec[i] = int8(x)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the vectors", len(b))
	}
	return m, m.Validate()
}
