package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFileTooLarge: a config file larger than MaxFileSize is refused, before it is read
// whole, with an error that says what the bound is, whether it is loaded from disk,
// from memory or imported.
func TestFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxFileSize+1)) // sparse: nothing is written
	require.NoError(t, f.Close())

	_, err = ReadFile(path)
	require.ErrorIs(t, err, ErrFileTooLarge)
	assert.Contains(t, err.Error(), fmt.Sprintf("it has %d bytes, more than the 16 MiB a config file may be", MaxFileSize+1))

	ws, problems := Load([]string{path}, nil)
	assert.Nil(t, ws)
	require.Len(t, problems, 1, render(problems))
	assert.Equal(t, SeverityError, problems[0].Severity)
	assert.Equal(t, path, problems[0].File)
	assert.Contains(t, problems[0].Message, "more than the 16 MiB a config file may be")

	big := append([]byte(`{"mcpServers": {}}`), bytes.Repeat([]byte(" "), MaxFileSize)...)
	ws, problems = LoadBytes("big.json", big, nil)
	assert.Nil(t, ws)
	assert.Contains(t, render(problems), "big.json: it has 16777234 bytes")
	assert.Contains(t, render(problems), "more than the 16 MiB a config file may be")

	out, problems := Import([]ImportFile{{Name: "big.json", Data: big}})
	assert.True(t, HasErrors(problems))
	assert.Contains(t, render(problems), "more than the 16 MiB a config file may be")
	assert.Contains(t, string(out), "big.json (not read: see the errors)")
}

// TestTooManyServers: a file that defines more than MaxServers servers is refused as a
// whole, natively or in a client's dialect, loaded or imported.
func TestTooManyServers(t *testing.T) {
	servers := func(n int) []byte {
		var b bytes.Buffer
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"s%d":{"command":"x"}`, i)
		}
		return b.Bytes()
	}
	over := servers(MaxServers + 1)
	for name, doc := range map[string][]byte{
		"native":     append(append([]byte(`{"version": 1, "servers": {`), over...), "}}"...),
		"mcpServers": append(append([]byte(`{"mcpServers": {`), over...), "}}"...),
	} {
		t.Run(name, func(t *testing.T) {
			want := fmt.Sprintf("%d servers, more than the %d a config file may define", MaxServers+1, MaxServers)
			ws, problems := LoadBytes("many.json", doc, nil)
			assert.Nil(t, ws)
			require.Len(t, problems, 1, "one error, not one per server")
			assert.Contains(t, problems[0].Message, want)

			out, problems := Import([]ImportFile{{Name: "many.json", Data: doc}})
			require.Len(t, problems, 1)
			assert.Contains(t, problems[0].Message, want)
			assert.Contains(t, string(out), "many.json (not read: see the errors)")
			assert.NotContains(t, string(out), "s0:")
		})
	}
	m := mappingNode(1)
	for i := range MaxServers {
		addPair(m, fmt.Sprint(i), 1, mappingNode(1))
	}
	r := &reader{}
	assert.False(t, tooManyServers(r, m), "MaxServers servers are read")
	assert.Empty(t, r.problems)
}
