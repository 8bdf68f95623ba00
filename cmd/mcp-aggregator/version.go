package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// stamp is what a binary knows of how it was built: the release version, the commit it
// was built from and the Go toolchain that built it.
type stamp struct {
	version  string
	commit   string // empty when neither the build nor the toolchain recorded one
	modified bool   // the toolchain saw uncommitted changes in the checkout
	goVer    string
}

// buildStamp reads the stamp of the running binary.
func buildStamp() stamp {
	info, _ := debug.ReadBuildInfo()
	return readStamp(version, commit, info)
}

// readStamp prefers what -ldflags -X set; a binary built without it (go build in a
// checkout, go install of a tagged module) still reports the module version and the
// vcs.revision the toolchain recorded. info may be nil.
func readStamp(version, commit string, info *debug.BuildInfo) stamp {
	s := stamp{version: version, commit: commit, goVer: runtime.Version()}
	if info == nil {
		return s
	}
	if info.GoVersion != "" {
		s.goVer = info.GoVersion
	}
	if version == defaultVersion && info.Main.Version != "" && info.Main.Version != "(devel)" {
		s.version = info.Main.Version
	}
	if commit != "" {
		return s
	}
	for _, setting := range info.Settings {
		switch setting.Key {
		case "vcs.revision":
			s.commit = setting.Value
		case "vcs.modified":
			s.modified = setting.Value == "true"
		}
	}
	return s
}

// buildVersion is the version the binary reports to clients (serverInfo, /status, metrics).
func buildVersion() string { return buildStamp().version }

// printVersion writes what `mcp-aggregator version` shows: the version alone on the first
// line, for scripts that read only that, then the commit and the toolchain.
func printVersion(w io.Writer) {
	s := buildStamp()
	commit := s.commit
	switch {
	case commit == "":
		commit = "unknown"
	case s.modified:
		commit += " (modified)"
	}
	fmt.Fprintf(w, "mcp-aggregator %s\ncommit: %s\ngo: %s %s/%s\n", s.version, commit, s.goVer, runtime.GOOS, runtime.GOARCH)
}
