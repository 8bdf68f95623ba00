package config

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reports changes to the given config files on the returned channel,
// debounced: a burst of writes becomes one signal. It watches each file's
// directory, not the file, because editors save by writing a temporary file
// and renaming it over the original, which leaves a watch on the file
// itself blind. A path that leads through symlinks is watched along the
// way: Kubernetes mounts a ConfigMap's files as links through a "..data"
// link that it swaps, by rename, for one to a new directory, and release
// tools switch a "current" link; no event names the config file then. So
// events on each link on the way count too, and those of the file the path
// leads to, in that file's own directory. A poll of the file each path
// leads to, its mtime and size, every poll interval backs the watch up on
// filesystems where events do not arrive, and for files in a directory
// that cannot be watched. A deleted file is signalled only if it has not
// come back within deleteGrace: a save by delete and recreate is one change.
// The channel holds at most one pending signal; it is closed when ctx ends.
func Watch(ctx context.Context, paths []string, debounce, poll time.Duration) (<-chan struct{}, error) {
	return watchWith(ctx, paths, debounce, poll, true)
}

// watchWith is Watch with the event watch optional, so the poll can be tested alone.
func watchWith(ctx context.Context, paths []string, debounce, poll time.Duration, events bool) (<-chan struct{}, error) {
	files := map[string]bool{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", p, err)
		}
		files[abs] = true
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config: %w", err)
	}
	var names map[string]bool // the paths whose events count
	follow := func() {
		names = routes(files)
		for name := range names {
			if !events {
				break
			}
			// A directory that cannot be watched (one that does not exist
			// yet, say) is left to the poll, which sees its files appear.
			// One watched already is left as it is.
			_ = w.Add(filepath.Dir(name))
		}
	}
	follow()
	out := make(chan struct{}, 1)
	last := snapshot(files) // before returning, so no change can slip between
	had := existing(files)
	go func() {
		defer close(out)
		defer w.Close()
		ticker := time.NewTicker(poll)
		defer ticker.Stop()
		var fire <-chan time.Time
		var timer *time.Timer
		graced := false // the pending signal was held back for a deleted file
		armFor := func(d time.Duration) {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			fire = timer.C
		}
		arm := func() { armFor(debounce) }
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if names[filepath.Clean(ev.Name)] {
					arm()
				}
			case <-w.Errors:
				// A lost event is caught by the poll below.
			case <-ticker.C:
				// A pending signal will cover this change; re-arming would
				// only push it back.
				if fire == nil && snapshot(files) != last {
					arm()
				}
			case <-fire:
				fire = nil
				if !graced && vanished(had, files) {
					// Some tools save by deleting the file and writing it
					// anew, more slowly than a debounce. A deleted config
					// means no servers, and every lease ends: before saying
					// so, give the file deleteGrace to come back.
					graced = true
					armFor(deleteGrace)
					continue
				}
				graced = false
				follow() // a link may lead elsewhere now
				last, had = snapshot(files), existing(files)
				select {
				case out <- struct{}{}:
				default: // a signal is already pending; it covers this change
				}
			}
		}
	}()
	return out, nil
}

// snapshot summarizes, for each file in the order of their names, the file
// its path leads to, that file's existence, mtime and size, so that
// unchanged files give the same summary every time. A link swapped for one
// to a file with the same mtime and size (a release unpacked from the same
// archive, say) changes the summary too.
func snapshot(files map[string]bool) string {
	s := ""
	for _, f := range slices.Sorted(maps.Keys(files)) {
		target, err := filepath.EvalSymlinks(f)
		if err != nil {
			target = f
		}
		if st, err := os.Stat(f); err == nil {
			s += fmt.Sprintf("%s|%s|%d|%d;", f, target, st.ModTime().UnixNano(), st.Size())
		} else {
			s += f + "|-;"
		}
	}
	return s
}

// deleteGrace is how long a deleted file may take to come back before its
// deletion is signalled.
const deleteGrace = 2 * time.Second

// existing returns which of files exist.
func existing(files map[string]bool) map[string]bool {
	out := make(map[string]bool, len(files))
	for f := range files {
		if _, err := os.Stat(f); err == nil {
			out[f] = true
		}
	}
	return out
}

// vanished reports whether a file of had no longer exists.
func vanished(had, files map[string]bool) bool {
	now := existing(files)
	for f := range had {
		if !now[f] {
			return true
		}
	}
	return false
}

// maxLinks bounds the symlinks followed on one path, as the kernel does.
const maxLinks = 40

// routes returns the paths whose events may change what the files hold:
// each file, every symlink its path goes through, and the file it leads to.
func routes(files map[string]bool) map[string]bool {
	names := map[string]bool{}
	for f := range files {
		names[f] = true
		for _, link := range linksOf(f) {
			names[link] = true
		}
		if target, err := filepath.EvalSymlinks(f); err == nil {
			names[target] = true
		}
	}
	return names
}

// linksOf returns the symlinks that the absolute path goes through, in the
// order they are followed: replacing any of them may make path lead to
// another file. It stops where the path leads nowhere.
func linksOf(path string) []string {
	var links []string
	vol := filepath.VolumeName(path)
	root := vol + string(filepath.Separator)
	dir, rest := root, components(path[len(vol):])
	for len(rest) > 0 && len(links) < maxLinks {
		next := filepath.Join(dir, rest[0])
		rest = rest[1:]
		st, err := os.Lstat(next)
		if err != nil {
			break
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			dir = next
			continue
		}
		links = append(links, next)
		target, err := os.Readlink(next)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		// Go on from the link's target, with the rest of the path after it.
		vol = filepath.VolumeName(target)
		dir, rest = vol+string(filepath.Separator), append(components(target[len(vol):]), rest...)
	}
	return links
}

// components splits a path without its volume name into its names.
func components(path string) []string {
	var names []string
	for _, name := range strings.Split(filepath.Clean(path), string(filepath.Separator)) {
		if name != "" && name != "." {
			names = append(names, name)
		}
	}
	return names
}
