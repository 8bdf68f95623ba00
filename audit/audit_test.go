package audit

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readLines(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "%s", sc.Bytes())
		out = append(out, r)
	}
	return out
}

func TestWritesLinesAndRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit", "calls.jsonl")
	l, err := Open(Config{To: path, MaxBytes: 600, Keep: 2}, nil)
	require.NoError(t, err)
	for i := range 10 {
		l.Write(Record{Time: time.Unix(int64(i), 0).UTC(), Event: "tools/call", Method: "tools/call", Tool: "t", Outcome: OK,
			Principal: Principal{Kind: "subject", Issuer: "https://id.example", Subject: "alice", Client: "app"}})
	}
	l.Close()
	current := readLines(t, path)
	older := readLines(t, path+".1")
	oldest := readLines(t, path+".2")
	require.NotEmpty(t, current)
	require.NotEmpty(t, older)
	require.NotEmpty(t, oldest)
	assert.NoFileExists(t, path+".3", "keep bounds the rotated files")
	assert.Equal(t, "alice", current[len(current)-1].Principal.Subject)
	assert.True(t, current[len(current)-1].Time.Equal(time.Unix(9, 0)), "the last record is in the current file")
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the audit log is the operator's only")
}

// TestWriteNeverBlocks: with the queue full, Write returns at once and
// counts the drop.
func TestWriteNeverBlocks(t *testing.T) {
	l := &Log{cfg: Config{To: "test"}, queue: make(chan Record, 1), done: make(chan struct{})}
	l.log = nilLogger()
	l.Write(Record{})
	l.Write(Record{})
	l.Write(Record{})
	assert.Equal(t, uint64(2), l.Dropped())
	var none *Log
	none.Write(Record{}) // a nil Log writes nothing
	assert.Zero(t, none.Dropped())
}

func nilLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
