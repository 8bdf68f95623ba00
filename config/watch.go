package config

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchTiming is how the watch paces its reports.
type WatchTiming struct {
	Debounce time.Duration // quiet after the last event before the files are looked at
	Poll     time.Duration // how often the files are checked for changes no event reported
	// Settle is how long a file written in place must stay unchanged (its
	// size, mtime and content) before its change is reported: a writer may
	// pause between the parts it writes, and the first parts may make a
	// valid config of their own.
	Settle time.Duration
	// SettleLimit bounds the wait for a change to settle: files that keep
	// changing longer are reported with an error, never as a change.
	SettleLimit time.Duration
}

// A Change is one report of the watch. With neither field set, the files
// changed and have settled: load them.
type Change struct {
	// Pending: the files are being written in place; they are looked at
	// again until they stay unchanged for the settle period. Nothing to load.
	Pending bool
	// Err: the files kept changing for the whole settle limit. They are not
	// reported as changed until they settle; the running config stays.
	Err error
}

// Watch reports changes to the given config files on the returned channel,
// debounced: a burst of writes becomes one report. It watches each file's
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
//
// A file replaced whole (by rename, or a link swapped) is reported after
// the debounce. A file written in place, or a change only the poll saw, is
// reported once it has stayed the same for timing.Settle, so that a file
// cut off between two of its writer's writes is never loaded.
//
// The watch keeps at most one report pending: a newer one replaces it,
// except that a Pending notice never replaces a change or an error. The
// channel is closed when ctx ends.
func Watch(ctx context.Context, paths []string, timing WatchTiming) (<-chan Change, error) {
	return watchWith(ctx, paths, timing, true)
}

// watchWith is Watch with the event watch optional, so the poll can be tested alone.
func watchWith(ctx context.Context, paths []string, timing WatchTiming, events bool) (<-chan Change, error) {
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
	out := make(chan Change)
	// Before returning, so no change can slip between.
	last, had, settledOn := snapshot(files), existing(files), contents(files)
	go func() {
		defer close(out)
		defer w.Close()
		ticker := time.NewTicker(timing.Poll)
		defer ticker.Stop()
		var fire <-chan time.Time
		var timer *time.Timer
		graced := false // the change was held back once for a deleted file
		armFor := func(d time.Duration) {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			fire = timer.C
		}
		// The change under way: when it began, whether it may be a write
		// in place, and what the files held when last looked at.
		var (
			began   time.Time
			inPlace bool
			seen    map[string]string
			noticed bool // Pending was reported for it
		)
		var (
			pending  *Change
			reportTo chan<- Change // out while a report is pending, else nil
		)
		report := func(c Change) {
			if c.Pending && pending != nil && !pending.Pending {
				return
			}
			pending, reportTo = &c, out
		}
		changing := func(written bool) {
			if began.IsZero() {
				began = time.Now()
			}
			inPlace = inPlace || written
			seen = nil
			// Events that never stop still end in a report at the limit.
			armFor(min(timing.Debounce, max(0, time.Until(began.Add(timing.SettleLimit)))))
		}
		done := func() { began, inPlace, seen, noticed, graced = time.Time{}, false, nil, false, false }
		for {
			var next Change
			if pending != nil {
				next = *pending
			}
			select {
			case <-ctx.Done():
				return
			case reportTo <- next:
				pending, reportTo = nil, nil
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if names[filepath.Clean(ev.Name)] {
					// A rename or a new link puts a whole file in place; a
					// write (a truncation too) may be one of several.
					changing(ev.Has(fsnotify.Write))
				}
			case <-w.Errors:
				// A lost event is caught by the poll below.
			case <-ticker.C:
				// A change under way will cover this one; re-arming would
				// only push it back. The poll cannot tell how the file
				// changed, so the change must settle.
				if began.IsZero() && snapshot(files) != last {
					changing(true)
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
				if inPlace {
					if now := contents(files); !maps.Equal(now, seen) {
						if time.Since(began) >= timing.SettleLimit {
							// Said again every limit while it lasts; the
							// change is reported once the files settle.
							report(Change{Err: unsettled(changedFiles(settledOn, now), timing)})
							began = time.Now()
						}
						// Not settled yet: look again after the settle
						// period, or after the debounce of the next event.
						seen = now
						if !noticed {
							noticed = true
							report(Change{Pending: true})
						}
						armFor(timing.Settle)
						continue
					}
				}
				done()
				follow() // a link may lead elsewhere now
				last, had, settledOn = snapshot(files), existing(files), contents(files)
				report(Change{})
			}
		}
	}()
	return out, nil
}

// unsettled is the error for files that kept changing.
func unsettled(files []string, timing WatchTiming) error {
	return fmt.Errorf("config file %s kept changing for %s without staying unchanged for %s; "+
		"it is not loaded until it does: stop whatever keeps writing it, or save it whole (write a temporary file, then rename it over the config)",
		strings.Join(files, ", "), timing.SettleLimit, timing.Settle)
}

// changedFiles returns, in order, the files whose contents differ between a
// and b; all of them when none does.
func changedFiles(a, b map[string]string) []string {
	var out []string
	for _, f := range slices.Sorted(maps.Keys(b)) {
		if a[f] != b[f] {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		out = slices.Sorted(maps.Keys(b))
	}
	return out
}

// contents returns, for each file, a summary of the file its path leads to
// that changes whenever what it holds does: its target, mtime, size and a
// digest of its bytes; "-" for a file that cannot be opened.
func contents(files map[string]bool) map[string]string {
	out := make(map[string]string, len(files))
	for f := range files {
		out[f] = content(f)
	}
	return out
}

// content summarizes one file for contents.
func content(path string) string {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		target = path
	}
	file, err := os.Open(path)
	if err != nil {
		return "-"
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return "-"
	}
	s := fmt.Sprintf("%s|%d|%d", target, st.ModTime().UnixNano(), st.Size())
	if !st.Mode().IsRegular() {
		return s // a device or a pipe could be read forever
	}
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return s + "|unreadable"
	}
	return s + "|" + hex.EncodeToString(h.Sum(nil))
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
