package discovery

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"read_file", []string{"read", "file"}},
		{"API-post-search", []string{"api", "post", "search"}},
		{"listDirectory", []string{"list", "directory"}},
		{"getHTTPStatus", []string{"get", "http", "status"}},
		{"HTTPServer2Go", []string{"http", "server2", "go"}},
		{"  Read  the file, please! ", []string{"read", "the", "file", "please"}},
		{"base64 k8s", []string{"base64", "k8s"}},
		{"ünïcødé Wörter", []string{"ünïcødé", "wörter"}},
		{"", nil},
		{"--__--", nil},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, words(tt.in), "%q", tt.in)
	}
}

func TestNameKey(t *testing.T) {
	for _, s := range []string{"read_file", "Read File", "read-file", "readFile", " READ  file "} {
		assert.Equal(t, "read_file", nameKey(s), "%q", s)
	}
}

func TestTerms(t *testing.T) {
	// Stop words and single letters go; inflections meet at one stem.
	assert.Equal(t, []string{"list", "file", "directori"}, stemmer{}.terms("List the files in a directory"))
	assert.Equal(t, stemmer{}.terms("creating issues"), stemmer{}.terms("create issue"))
	assert.Equal(t, stemmer{}.terms("searches"), stemmer{}.terms("search"))
	assert.Equal(t, []string{"scroll", "down"}, stemmer{}.terms("scroll down"), "direction words are kept")
	assert.Equal(t, []string{"2024"}, stemmer{}.terms("2024 x"))
}

func TestEditsWithin(t *testing.T) {
	tests := []struct {
		a, b string
		k    int
		want bool
	}{
		{"read_file", "read_file", 0, true},
		{"raed_file", "read_file", 1, true}, // a swap is one edit
		{"read_fil", "read_file", 1, true},
		{"read_fiel", "read_file", 1, true},
		{"rad_fle", "read_file", 1, false},
		{"rad_fle", "read_file", 2, true},
		{"githb_create_issue", "github_create_issue", 1, true},
		{"x", "read_file", 2, false},
		{"", "ab", 2, true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, editsWithin(tt.a, tt.b, tt.k) <= tt.k, "%q %q %d", tt.a, tt.b, tt.k)
	}
}
