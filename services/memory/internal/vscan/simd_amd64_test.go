package vscan

// distanceWays are the ways distances can be computed on this machine, by name.
func distanceWays(words int) map[string]func(codes, qc []uint64, dist []uint16) {
	ways := map[string]func(codes, qc []uint64, dist []uint16){"Go": distancesGo, "distances": distances}
	if haveAVX512 {
		ways["AVX-512"] = func(codes, qc []uint64, dist []uint16) {
			distAVX512(&codes[0], &qc[0], len(qc), &dist[0], len(dist)/block)
		}
	}
	if haveAVX2 && words <= maxAVX2Words {
		ways["AVX2"] = func(codes, qc []uint64, dist []uint16) {
			distAVX2(&codes[0], &qc[0], len(qc), &dist[0], len(dist)/block)
		}
	}
	return ways
}
