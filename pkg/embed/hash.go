package embed

import "unicode/utf8"

// FNV-1a, 64 bit (the constants of hash/fnv), computed inline: the hash/fnv Hash interface
// would allocate for every n-gram. Fixed constants make a feature's bucket the same in every
// process, which stored vectors depend on (hash/maphash seeds randomly).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

type hash uint64

func newHash(kind byte) hash { return hash(fnvOffset).byte(kind) }

func (h hash) byte(c byte) hash { return (h ^ hash(c)) * fnvPrime }

func (h hash) str(s string) hash {
	for i := 0; i < len(s); i++ {
		h = h.byte(s[i])
	}
	return h
}

// rune hashes r's UTF-8 bytes, so hashing runes one by one equals hashing their string.
func (h hash) rune(r rune) hash {
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	for _, c := range buf[:n] {
		h = h.byte(c)
	}
	return h
}

func (h hash) sum() uint64 { return uint64(h) }

// mix is a 64-bit finaliser (MurmurHash3's fmix64). FNV's high bits, which choose the sign,
// depend weakly on a string's last bytes; mixing spreads every input bit over the bucket and
// the sign.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
