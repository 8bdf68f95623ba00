package discovery

// wordTable maps the words a reader has seen to their term numbers. It is
// the index build's one lookup per word of the catalog: an open-addressing
// table keyed by the bytes as scanned, so that a word already seen costs a
// short hash and one comparison, with no allocation.
type wordTable struct {
	slots []wordSlot // a power of two long; an empty word marks a free slot
	used  int
}

type wordSlot struct {
	hash uint32
	id   int32 // term number, -1 for a word that is not indexed
	word string
}

// hashWord is FNV-1a over w.
func hashWord(w []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range w {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// find returns the slot of w: the one holding it, or the free one where it
// belongs (then ok is false and the caller may fill it with put).
func (t *wordTable) find(w []byte, h uint32) (slot *wordSlot, ok bool) {
	if t.slots == nil {
		t.slots = make([]wordSlot, 1024)
	}
	mask := uint32(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.word == "" {
			return s, false
		}
		if s.hash == h && s.word == string(w) {
			return s, true
		}
	}
}

// put fills a free slot that find returned for w. It may move every slot,
// so slot is not to be used after.
func (t *wordTable) put(slot *wordSlot, w []byte, h uint32, id int32) {
	*slot = wordSlot{hash: h, id: id, word: string(w)}
	t.used++
	if t.used*4 < len(t.slots)*3 {
		return
	}
	old := t.slots
	t.slots = make([]wordSlot, 2*len(old))
	mask := uint32(len(t.slots) - 1)
	for _, s := range old {
		if s.word == "" {
			continue
		}
		i := s.hash & mask
		for t.slots[i].word != "" {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
