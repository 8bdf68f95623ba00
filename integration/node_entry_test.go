package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// outcomeTB records how a test helper ends a test: skipped, failed, or not at all.
type outcomeTB struct {
	testing.TB
	skip, fatal string
}

func (o *outcomeTB) Helper() {}
func (o *outcomeTB) Skipf(format string, args ...any) {
	o.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (o *outcomeTB) Fatalf(format string, args ...any) {
	o.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// outcome runs nodeEntryIn as a test would and reports how it ended.
func outcome(dir string, slow bool, rel string) (o *outcomeTB, path string) {
	o = &outcomeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path = nodeEntryIn(o, dir, slow, rel)
	}()
	<-done
	return o, path
}

// TestNodeEntryWithoutNode: a checkout without Node.js or without the pinned packages
// skips the Node.js tests in a plain go test run, saying what they need, and fails them
// with the slow switch on, as in .ci/run, where a missing one is a broken setup.
func TestNodeEntryWithoutNode(t *testing.T) {
	const rel = "@scope/pkg/dist/index.js"
	noPackages := t.TempDir()
	withPackage := t.TempDir()
	entry := filepath.Join(withPackage, "node_modules", filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(entry), 0o755))
	require.NoError(t, os.WriteFile(entry, nil, 0o644))
	fakeNode := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(fakeNode, "node"), []byte("#!/bin/sh\n"), 0o755))

	t.Run("no node, switch off: skipped", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		o, _ := outcome(withPackage, false, rel)
		assert.Empty(t, o.fatal)
		assert.Contains(t, o.skip, "needs Node.js, which is not on PATH")
		assert.Contains(t, o.skip, slowVar+"=1")
	})
	t.Run("no node, switch on: failed", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		o, _ := outcome(withPackage, true, rel)
		assert.Empty(t, o.skip)
		assert.Contains(t, o.fatal, "node is not on PATH")
	})
	t.Run("no packages, switch off: skipped, nothing installed", func(t *testing.T) {
		t.Setenv("PATH", fakeNode)
		o, _ := outcome(noPackages, false, rel)
		assert.Empty(t, o.fatal)
		assert.Contains(t, o.skip, rel+" is not installed: run npm ci in integration/node")
		assert.NoDirExists(t, filepath.Join(noPackages, "node_modules"))
	})
	t.Run("node and packages: the entry", func(t *testing.T) {
		t.Setenv("PATH", fakeNode)
		for _, slow := range []bool{false, true} {
			o, path := outcome(withPackage, slow, rel)
			assert.Empty(t, o.skip)
			assert.Empty(t, o.fatal)
			assert.Equal(t, entry, path)
		}
	})
}
