package browser

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
)

// Open opens url in the user's browser and returns at once: the opener is
// started, not waited for, as one may stay until the browser closes. What
// keeps the browser from opening (no opener, or an opener that fails) is
// written to problems, with the advice to open the URL by hand: at once
// when the opener cannot start, else when it exits, from a goroutine of
// its own.
func Open(url string, problems io.Writer) {
	name, args := opener(url)
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(problems, "could not open a browser (%v); open the URL above by hand\n", err)
		return
	}
	go func() {
		if err := cmd.Wait(); err != nil {
			fmt.Fprintf(problems, "could not open a browser (%s: %v); open the URL above by hand\n", name, err)
		}
	}()
}

// opener is the command that opens url in the browser on this system.
func opener(url string) (name string, args []string) {
	switch runtime.GOOS {
	case "darwin":
		return "open", []string{url}
	case "windows":
		return "rundll32", []string{"url.dll,FileProtocolHandler", url}
	default:
		return "xdg-open", []string{url}
	}
}
