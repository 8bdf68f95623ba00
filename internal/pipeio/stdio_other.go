//go:build !unix

package pipeio

import (
	"io"
	"os"
)

// PollStdio returns stdin and stdout as they are where the poller cannot
// serve them: polled is false, and restore does nothing.
func PollStdio(stdin io.Reader, stdout io.Writer) (in io.Reader, out io.Writer, polled bool, restore func()) {
	return stdin, stdout, false, func() {}
}

// Poll reports false: no descriptor is read through the poller here.
func Poll(*os.File) (p *Pipe, restore func(), ok bool) { return nil, nil, false }
