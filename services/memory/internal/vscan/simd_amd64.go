package vscan

import "golang.org/x/sys/cpu"

// The scan's two loops in assembly (simd_amd64.s) where the CPU has the instructions:
// the distances by AVX-512 (VPOPCNTQ: eight codes' words at once) or AVX2 (a nibble
// table's popcount), the dot product by AVX2 with FMA. Elsewhere they are the Go loops.
var (
	haveAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPOPCNTDQ
	haveAVX2   = cpu.X86.HasAVX2
	haveFMA    = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)

// distances writes the Hamming distance of each code of codes (whole blocks, see
// Set.codes) to qc into dist, one per vector of the blocks.
func distances(codes, qc []uint64, dist []uint16) {
	blocks := len(dist) / block
	if blocks == 0 {
		return
	}
	if len(codes) < blocks*len(qc)*block {
		panic("vscan: distances: codes shorter than the blocks")
	}
	switch {
	case haveAVX512:
		distAVX512(&codes[0], &qc[0], len(qc), &dist[0], blocks)
	case haveAVX2 && len(qc) <= maxAVX2Words:
		distAVX2(&codes[0], &qc[0], len(qc), &dist[0], blocks)
	default:
		distancesGo(codes, qc, dist)
	}
}

// maxAVX2Words is the most words a code may have for distAVX2, which counts each byte's
// bits over all the words in one byte (at most 8 a word).
const maxAVX2Words = 31

// dot is the dot product of a and b[:len(a)].
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	n := len(a) &^ 7
	if !haveFMA || n == 0 {
		return dotGo(a, b)
	}
	s := dotFMA(&a[0], &b[0], n)
	if n < len(a) {
		s += dotGo(a[n:], b[n:])
	}
	return s
}

// simd names the SIMD the scan uses on this machine.
func simd() string {
	d := "Go"
	switch {
	case haveAVX512:
		d = "AVX-512"
	case haveAVX2:
		d = "AVX2"
	}
	f := "Go"
	if haveFMA {
		f = "AVX2+FMA"
	}
	return "distances " + d + ", dot " + f
}

// distAVX512 writes the distances of blocks blocks of codes of words words to qc into
// dist (blocks*8 of them).
//
//go:noescape
func distAVX512(codes, qc *uint64, words int, dist *uint16, blocks int)

// distAVX2 is distAVX512 for AVX2, for codes of at most maxAVX2Words words.
//
//go:noescape
func distAVX2(codes, qc *uint64, words int, dist *uint16, blocks int)

// dotFMA is the dot product of a[:n] and b[:n], n a multiple of 8 and at least 8.
//
//go:noescape
func dotFMA(a, b *float32, n int) float32
