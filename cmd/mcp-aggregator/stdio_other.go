//go:build !unix

package main

import "io"

// pollableStdio leaves stdin and stdout as they are where the poller cannot
// serve them.
func pollableStdio(stdin io.Reader, stdout io.Writer) (io.Reader, io.Writer, bool, func()) {
	return stdin, stdout, false, func() {}
}
