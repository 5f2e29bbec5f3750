//go:build !amd64

package vscan

// distances writes the Hamming distance of each code of codes (whole blocks, see
// Set.codes) to qc into dist, one per vector of the blocks.
func distances(codes, qc []uint64, dist []uint16) { distancesGo(codes, qc, dist) }

// dot is the dot product of a and b[:len(a)].
func dot(a, b []float32) float32 { return dotGo(a, b) }

// simd names the SIMD the scan uses on this machine.
func simd() string { return "none" }
