// Package reload keeps a serving aggregator on the files it reads as they
// are on disk: the first load (which ends serve at once when a server
// marked required cannot start), then a watch of the config files and the
// env files they name, and a reload of the proxy when one changes, on
// SIGHUP, or when a stored login changed; one load at a time, a newer
// config abandoning the starts of the load under way that it no longer
// wants. Problems a load finds are logged at their severity. The session
// key file is watched the same way, its keys swapped in when it loads.
package reload
