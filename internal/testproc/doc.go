// Package testproc is what the tests of packages that start real processes
// share: the TestMain by which a test binary stands in for the processes its
// tests start (the demo servers, and whatever roles a package adds), the wait
// bound, a log handler that keeps records as lines to wait on, and the checks
// that a process is gone or reaped. Only tests import it.
package testproc
