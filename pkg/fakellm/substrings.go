package fakellm

// substrings tells which of a fixed set of strings occur in a text, in one pass over the
// text however many strings there are (an Aho–Corasick automaton, as a table of every
// state's next state per byte class). A script's entries are tried against every request
// in order, and before this each entry cost a scan of the whole prompt of its own: the
// end-to-end suite's script has hundreds of entries and a build's prompts tens of
// kilobytes, which made the fake model the largest user of CPU in the builder benchmark
// (about 8 ms per request), taken from the services it measures on a two-core machine.
type substrings struct {
	class  [256]uint16 // byte → its class: bytes no pattern has share class 0
	nclass int
	next   []int32   // next[state*nclass+class]: the automaton's transitions, complete
	own    [][]int32 // own[state]: the patterns that end exactly at state
	dict   []int32   // dict[state]: the nearest proper suffix state with patterns of its own, or -1
	emits  []bool    // emits[state]: a pattern ends at state or at a suffix of it
	empty  []int32   // patterns that are "", in every text
	n      int
}

// newSubstrings indexes pats; a pattern's id is its index in pats.
func newSubstrings(pats []string) *substrings {
	s := &substrings{n: len(pats)}
	for _, p := range pats {
		for i := 0; i < len(p); i++ {
			if s.class[p[i]] == 0 {
				s.nclass++
				s.class[p[i]] = uint16(s.nclass)
			}
		}
	}
	s.nclass++ // class 0, for bytes in no pattern
	// The trie: state 0 is the root; -1 is no edge until the automaton is completed.
	addState := func() int32 {
		for range s.nclass {
			s.next = append(s.next, -1)
		}
		s.own = append(s.own, nil)
		return int32(len(s.own) - 1)
	}
	addState()
	for id, p := range pats {
		if p == "" {
			s.empty = append(s.empty, int32(id))
			continue
		}
		st := int32(0)
		for i := 0; i < len(p); i++ {
			k := int(st)*s.nclass + int(s.class[p[i]])
			if s.next[k] < 0 {
				child := addState()
				s.next[k] = child // after addState: it may have moved s.next
			}
			st = s.next[k]
		}
		s.own[st] = append(s.own[st], int32(id))
	}
	// Breadth first, each state's failure (its longest proper suffix that is a state) is
	// complete before its children need it; a missing edge takes the failure's.
	states := len(s.own)
	fail := make([]int32, states)
	s.dict = make([]int32, states)
	s.emits = make([]bool, states)
	s.dict[0] = -1
	queue := make([]int32, 0, states)
	for c := range s.nclass {
		if child := s.next[c]; child < 0 {
			s.next[c] = 0
		} else {
			fail[child] = 0
			queue = append(queue, child)
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		f := fail[st]
		if len(s.own[f]) > 0 {
			s.dict[st] = f
		} else {
			s.dict[st] = s.dict[f]
		}
		s.emits[st] = len(s.own[st]) > 0 || s.dict[st] >= 0
		for c := range s.nclass {
			k := int(st)*s.nclass + c
			if child := s.next[k]; child < 0 {
				s.next[k] = s.next[int(f)*s.nclass+c]
			} else {
				fail[child] = s.next[int(f)*s.nclass+c]
				queue = append(queue, child)
			}
		}
	}
	return s
}

// find sets found[id] for every pattern text contains (found has one entry per pattern,
// all false on the call).
func (s *substrings) find(text string, found []bool) {
	for _, id := range s.empty {
		found[id] = true
	}
	// A state whose patterns were reported once has nothing new to report: its suffix
	// chain was walked then too.
	var reported map[int32]bool
	st := int32(0)
	for i := 0; i < len(text); i++ {
		st = s.next[int(st)*s.nclass+int(s.class[text[i]])]
		if !s.emits[st] || reported[st] {
			continue
		}
		if reported == nil {
			reported = map[int32]bool{}
		}
		for e := st; e >= 0 && !(e != st && reported[e]); e = s.dict[e] {
			reported[e] = true
			for _, id := range s.own[e] {
				found[id] = true
			}
		}
	}
}
