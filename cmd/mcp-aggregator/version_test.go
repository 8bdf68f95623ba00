package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReadStamp(t *testing.T) {
	vcs := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	tests := []struct {
		name            string
		version, commit string
		info            *debug.BuildInfo
		want            stamp
	}{
		{"stamped by the release build", "1.2.3", "abc123", vcs("(devel)", "vcs.revision", "fff", "vcs.modified", "true"),
			stamp{version: "1.2.3", commit: "abc123", goVer: "go1.99.1"}},
		{"go build in a checkout", defaultVersion, "", vcs("v0.0.0-20261129044249-0123abcd0000+dirty", "vcs.revision", "0123abcd0000", "vcs.modified", "true"),
			stamp{version: "v0.0.0-20261129044249-0123abcd0000+dirty", commit: "0123abcd0000", modified: true, goVer: "go1.99.1"}},
		{"go build without version control information", defaultVersion, "", vcs("(devel)"),
			stamp{version: defaultVersion, goVer: "go1.99.1"}},
		{"go install of a tagged module", defaultVersion, "", vcs("v1.4.0"),
			stamp{version: "v1.4.0", goVer: "go1.99.1"}},
		{"a stamped version beats the module's", "1.2.3", "", vcs("v1.4.0", "vcs.revision", "0123abcd"),
			stamp{version: "1.2.3", commit: "0123abcd", goVer: "go1.99.1"}},
		{"no build info", defaultVersion, "", nil,
			stamp{version: defaultVersion, goVer: runtime.Version()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, readStamp(tt.version, tt.commit, tt.info))
		})
	}
}

// TestPrintVersionStamped: the values -ldflags -X sets are what `version` prints.
func TestPrintVersionStamped(t *testing.T) {
	oldVersion, oldCommit := version, commit
	t.Cleanup(func() { version, commit = oldVersion, oldCommit })
	version, commit = "9.8.7", "deadbeefcafe"

	var out bytes.Buffer
	printVersion(&out)
	assert.Equal(t, "mcp-aggregator 9.8.7\ncommit: deadbeefcafe\ngo: "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n", out.String())
}
