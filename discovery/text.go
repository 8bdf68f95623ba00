package discovery

import (
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// eachWord calls fn with every word of text, lower-cased: runs of letters
// and digits, cut again where a camelCase or PascalCase name turns
// ("getHTTPStatus" gives get, http, status), so snake_case, kebab-case and
// camelCase names read as the words they are made of. The slice fn gets is
// reused for the next word.
func eachWord[T string | []byte](text T, fn func(word []byte)) {
	var sc scanner
	scanWords(&sc, text, false, funcSink(fn))
}

// wordSink receives the words of a scan. The index passes itself, so that
// reading a catalog allocates nothing per word or per field.
type wordSink interface{ word(w []byte) }

// funcSink is a wordSink that calls a function.
type funcSink func([]byte)

func (f funcSink) word(w []byte) { f(w) }

// scanner holds the word being built; one scanner serves any number of
// scans, one at a time.
type scanner struct{ buf []byte }

// scanWords hands sink every word of text (see eachWord). With escaped set,
// text is the content of a JSON string as it is written, escapes and all:
// an escape (\n, \", \u00e9) separates words. A catalog is read this way
// without decoding, or copying, its strings.
func scanWords[T string | []byte](sc *scanner, text T, escaped bool, sink wordSink) {
	word := sc.buf[:0]
	cur := rune(-1) // the last rune of word
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			// ASCII, nearly all of a catalog: no decoding, no tables.
			i++
			switch {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				// A small letter or digit never starts a word inside one.
			case 'A' <= c && c <= 'Z':
				// A capital starts a new word after a small letter or a digit
				// (fooBar, v2Beta), and so does the last capital of a run that
				// a small letter follows (HTTPServer).
				if cur >= 0 && (isLower(cur) || isDigit(cur) || isUpper(cur) && i < len(text) && isLowerAt(text, i)) {
					if len(word) > 0 {
						sink.word(word)
					}
					word, cur = word[:0], -1
				}
				c += 'a' - 'A'
			case c == '\\' && escaped:
				if len(word) > 0 {
					sink.word(word)
				}
				word, cur = word[:0], -1
				if i < len(text) && text[i] == 'u' {
					i += 4
				}
				i++
				continue
			default:
				if len(word) > 0 {
					sink.word(word)
				}
				word, cur = word[:0], -1
				continue
			}
			word = append(word, c)
			cur = rune(text[i-1])
			continue
		}
		r, size := decodeRune(text, i)
		i += size
		if !isWordRune(r) {
			if len(word) > 0 {
				sink.word(word)
			}
			word, cur = word[:0], -1
			continue
		}
		if cur >= 0 && isUpper(r) && (isLower(cur) || isDigit(cur) || isUpper(cur) && i < len(text) && isLowerAt(text, i)) {
			if len(word) > 0 {
				sink.word(word)
			}
			word, cur = word[:0], -1
		}
		word = utf8.AppendRune(word, unicode.ToLower(r))
		cur = r
	}
	if len(word) > 0 {
		sink.word(word)
	}
	sc.buf = word[:0]
}

// decodeRune decodes the rune at text[i:].
func decodeRune[T string | []byte](text T, i int) (rune, int) {
	return utf8.DecodeRune([]byte(text[i:min(i+utf8.UTFMax, len(text))]))
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isUpper(r rune) bool {
	if r < utf8.RuneSelf {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.IsUpper(r)
}

func isLower(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z'
	}
	return unicode.IsLower(r)
}

func isDigit(r rune) bool {
	if r < utf8.RuneSelf {
		return '0' <= r && r <= '9'
	}
	return unicode.IsDigit(r)
}

func isLowerAt[T string | []byte](text T, i int) bool {
	r, _ := decodeRune(text, i)
	return isLower(r)
}

// words returns the words of text (see eachWord).
func words(text string) []string {
	var out []string
	eachWord(text, func(w []byte) { out = append(out, string(w)) })
	return out
}

// nameKey is a name or query reduced to its words joined by '_', so that
// "Read File", "read-file" and "readFile" all compare equal to read_file.
func nameKey(text string) string {
	var k keySink
	var sc scanner
	scanWords(&sc, text, false, &k)
	return string(k.b)
}

// keySink joins the words it receives with '_'.
type keySink struct{ b []byte }

func (k *keySink) word(w []byte) {
	if len(k.b) > 0 {
		k.b = append(k.b, '_')
	}
	k.b = append(k.b, w...)
}

// stopWords carry no meaning for telling tools apart. The list is short on
// purpose: words such as "up", "down", "all", "new" or "not" often do.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"can": true, "do": true, "for": true, "from": true, "how": true, "i": true, "if": true, "in": true,
	"into": true, "is": true, "it": true, "its": true, "me": true, "my": true, "of": true, "on": true,
	"or": true, "please": true, "should": true, "so": true, "that": true, "the": true, "their": true,
	"them": true, "then": true, "there": true, "these": true, "this": true, "those": true, "to": true,
	"use": true, "used": true, "using": true, "want": true, "was": true, "we": true, "what": true,
	"when": true, "which": true, "will": true, "with": true, "would": true, "you": true, "your": true,
}

// stemmer turns words into index terms, remembering what it has seen: a
// catalog repeats the same few thousand words over and over.
type stemmer map[string]string

// term is the index term of one lower-cased word: its stem (Porter2), so
// that "files", "filed" and "file" meet; "" for stop words and single
// letters, which are not indexed.
func (s stemmer) term(w []byte) string {
	if t, ok := s[string(w)]; ok { // no allocation on a hit
		return t
	}
	word := string(w)
	t, known := stems.Load(word)
	if !known {
		switch {
		case len(w) < 2 || stopWords[word]:
			t = ""
		case isNumber(word):
			t = word
		default:
			t = english.Stem(word, true)
		}
		if stemCount.Load() < maxStems {
			if _, had := stems.LoadOrStore(word, t); !had {
				stemCount.Add(1)
			}
		}
	}
	s[word] = t.(string)
	return t.(string)
}

// stems remembers the terms of words across indexes, for the whole
// process: the next catalog (a reload, a restarted server) has mostly the
// same words, and stemming is the dearest step of reading a new word. It
// stops growing at maxStems words.
var (
	stems     sync.Map // word -> term
	stemCount atomic.Int64
)

const maxStems = 1 << 17

// terms are the index terms of text, in order.
func (s stemmer) terms(text string) []string {
	var out []string
	eachWord(text, func(w []byte) {
		if t := s.term(w); t != "" {
			out = append(out, t)
		}
	})
	return out
}

func isNumber(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
	}
	return w != ""
}
