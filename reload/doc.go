// Package reload keeps a serving aggregator on the config as it is on
// disk: it watches the config files and the env files they name, and
// reloads the proxy when one changes, on SIGHUP, or when a stored login
// changed; one load at a time, a newer config abandoning the starts of the
// load under way that it no longer wants. Problems a load finds are logged
// at their severity.
package reload
