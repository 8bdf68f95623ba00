package config

import (
	"errors"
	"io/fs"
	"os"
)

// Empty is the workspace of an absent config: no servers, default settings.
func Empty() *Workspace {
	return &Workspace{Limits: Limits{MaxInstances: DefaultMaxInstances}, Admin: Admin{Enabled: true, LeaseReminder: true}, Naming: Naming{ValidPattern: DefaultValidPattern},
		HTTP: HTTP{MaxBodyBytes: DefaultMaxBodyBytes, MaxBatchBytes: DefaultMaxBatchBytes}, Discovery: Discovery{Mode: DiscoveryAll},
		Cache: Cache{MaxBytes: DefaultCacheMaxBytes}}
}

// LoadExisting loads the files of paths that exist, treating absent files
// as empty: a config file deleted while running means "no servers". It
// returns Empty when none exists.
func LoadExisting(paths []string, lookupEnv func(string) (string, bool)) (*Workspace, []Problem) {
	var present []string
	var problems []Problem
	for _, p := range paths {
		if fileExists(p) {
			present = append(present, p)
		} else {
			problems = append(problems, Problem{Severity: SeverityWarning, File: p,
				Message: "file does not exist; treated as empty (no servers)"})
		}
	}
	if len(present) == 0 {
		return Empty(), problems
	}
	ws, more := Load(present, lookupEnv)
	return ws, append(problems, more...)
}

// fileExists reports whether anything is at p: a directory or an unreadable
// file there is a mistake that Load reports, not an absent file.
func fileExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, fs.ErrNotExist)
}
