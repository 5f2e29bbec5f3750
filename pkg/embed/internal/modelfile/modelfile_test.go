package modelfile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func testModel() *Model {
	return &Model{
		Header:  Header{Version: "local@2", Words: 3, Dims: 2, Manifest: "abc", Tokens: 42, Window: 5, Smoothing: 0.75, EigenPow: -0.5},
		Words:   []string{"retry", "größe", "日本"},
		LogProb: []float32{-1, -2, -3},
		Scale:   []float32{0.01, 0.02, 0.03},
		Vec:     []int8{127, -127, 0, 5, -1, 1},
		Common:  []float32{0.6, 0.8},
	}
}

func encode(t *testing.T, m *Model) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	b := encode(t, testModel())
	if again := encode(t, testModel()); !bytes.Equal(b, again) {
		t.Error("the same model encodes to different bytes")
	}
	got, err := Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(testModel(), got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// regzip compresses body with a valid gzip stream, so the checks after decompression run.
func regzip(t *testing.T, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(body)
	zw.Close()
	return buf.Bytes()
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestDecodeRefusesCorruptModels(t *testing.T) {
	t.Parallel()
	good := encode(t, testModel())
	body := gunzip(t, good)
	flipped := bytes.Clone(body)
	flipped[len(magic)+10] ^= 0x20 // inside the header, checksum unchanged
	vecFlip := bytes.Clone(body)
	vecFlip[len(vecFlip)-40] ^= 1
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not gzip", []byte("hello, this is not a model")},
		{"truncated gzip", good[:len(good)/2]},
		{"gzip of garbage", regzip(t, []byte("garbage garbage garbage garbage garbage garbage"))},
		{"body truncated", regzip(t, body[:len(body)-100])},
		{"header byte changed", regzip(t, flipped)},
		{"vector byte changed", regzip(t, vecFlip)},
		{"other layout version", regzip(t, append([]byte("TFWVEC\x00\x02"), body[len(magic):]...))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Decode(bytes.NewReader(tc.data))
			if err == nil || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode = %v, %v; want an error wrapping ErrCorrupt", m, err)
			}
		})
	}
}

func TestEncodeRefusesInconsistentModels(t *testing.T) {
	t.Parallel()
	cases := map[string]func(m *Model){
		"vector count":     func(m *Model) { m.Vec = m.Vec[:5] },
		"word count":       func(m *Model) { m.Words = m.Words[:2] },
		"common size":      func(m *Model) { m.Common = m.Common[:1] },
		"no dimensions":    func(m *Model) { m.Dims = 0 },
		"scale count":      func(m *Model) { m.Scale = nil },
		"frequency count ": func(m *Model) { m.LogProb = append(m.LogProb, 1) },
	}
	for name, spoil := range cases {
		m := testModel()
		spoil(m)
		if err := Encode(&bytes.Buffer{}, m); err == nil {
			t.Errorf("%s: Encode accepted an inconsistent model", name)
		}
	}
}
