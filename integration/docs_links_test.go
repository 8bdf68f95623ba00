package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// mdLink is a Markdown link or image: its target, up to the closing
	// parenthesis or a title.
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)[^)]*\)`)
	// mdFence is a fenced code block, whose text is not Markdown.
	mdFence = regexp.MustCompile("(?ms)^```.*?^```")
)

// TestDocsLinksResolve fails when the README or a page in docs/ links to a file
// of the repository that does not exist, or to a heading its target does not
// have (a section renamed or moved to another page): links within the project
// must keep working as the pages change. Links to other sites are not checked.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "README.md"))
	require.Greater(t, len(pages), 10, "the README and the pages of docs/")
	headings := map[string]map[string]bool{}
	checked := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, page)
		for _, m := range mdLink.FindAllStringSubmatch(mdFence.ReplaceAllString(string(data), ""), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := page
			if path != "" {
				target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
			}
			checked++
			if _, err := os.Stat(target); err != nil {
				assert.Failf(t, "a link to a file that does not exist", "%s links to %s", rel, link)
				continue
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if headings[target] == nil {
				headings[target] = headingSlugs(t, target)
			}
			assert.True(t, headings[target][anchor], "%s links to %s, a heading %s does not have", rel, link, filepath.Base(target))
		}
	}
	assert.Greater(t, checked, 50, "links were found and checked")
}

// headingSlugs returns the anchors of the headings of a Markdown page, as
// GitHub makes them: lower case, punctuation but '-' and '_' dropped,
// spaces as '-'.
func headingSlugs(t *testing.T, page string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(page)
	require.NoError(t, err)
	slugs := map[string]bool{}
	for _, line := range strings.Split(mdFence.ReplaceAllString(string(data), ""), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slugs[b.String()] = true
	}
	return slugs
}
