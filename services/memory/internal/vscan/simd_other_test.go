//go:build !amd64

package vscan

// distanceWays are the ways distances can be computed on this machine, by name.
func distanceWays(int) map[string]func(codes, qc []uint64, dist []uint16) {
	return map[string]func(codes, qc []uint64, dist []uint16){"Go": distancesGo, "distances": distances}
}
