package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/internal/browser"
	"github.com/mcp-aggregator/mcp-aggregator/listing"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
	"github.com/mcp-aggregator/mcp-aggregator/upstreamauth"
)

// login runs the OAuth authorization code flow for one server of the config
// and stores the tokens where a running aggregator picks them up.
func login(args []string, stdout, stderr io.Writer) int {
	var noBrowser, printDoc *bool
	var timeout *time.Duration
	id, srv, store, code := oauthCommand("login", args, stdout, stderr, func(fs *flag.FlagSet) {
		noBrowser = fs.Bool("no-browser", false, "print the authorization URL only; do not open a browser")
		timeout = fs.Duration("timeout", oauth.DefaultLoginTimeout, "how long to wait for the browser to come back")
		printDoc = fs.Bool("client-metadata", false, "print the client ID metadata document of the server's login, to host at its oauth.client_id_url, and exit")
	})
	if srv == nil {
		return code
	}
	if *printDoc {
		if srv.Auth.ClientIDURL == "" {
			fmt.Fprintf(stderr, "login: server %q has no client ID metadata document URL; set oauth.client_id_url (or the server's auth.client_id_url) to the public https URL it is to be served at\n", id)
			return 1
		}
		_, _ = stdout.Write(oauth.ClientMetadata(srv.Auth.ClientIDURL, srv.Auth.ClientName))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	grant, err := oauth.Login(ctx, oauth.LoginOptions{
		Server:  srv,
		Timeout: *timeout,
		Authorize: func(authURL string) {
			fmt.Fprintf(stderr, "To log in to %s, open this URL in a browser:\n", id)
			fmt.Fprintln(stdout, authURL)
			if !*noBrowser {
				browser.Open(authURL, stderr)
			}
		},
	})
	if err != nil {
		fmt.Fprintln(stderr, "login:", err)
		return 1
	}
	if err := store.Save(grant); err != nil {
		fmt.Fprintln(stderr, "login:", err)
		return 1
	}
	fmt.Fprintf(stdout, "logged in to %s\n", id)
	return 0
}

// logout revokes the stored tokens of one server at their issuer (RFC
// 7009), where it offers that, and removes them: the local copy goes even
// when the revocation fails, which is said on stderr.
func logout(args []string, stdout, stderr io.Writer) int {
	id, srv, store, code := oauthCommand("logout", args, stdout, stderr, nil)
	if srv == nil {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	removed, warnings, err := upstreamauth.Logout(ctx, store, srv)
	for _, w := range warnings {
		fmt.Fprintln(stderr, "logout:", w)
	}
	if err != nil {
		fmt.Fprintln(stderr, "logout:", err)
		return 1
	}
	if removed == 0 {
		fmt.Fprintf(stdout, "no stored login for %s\n", id)
		return 0
	}
	fmt.Fprintf(stdout, "logged out of %s\n", id)
	return 0
}

// oauthCommand parses the flags of the command name (the common ones, and
// those flags registers, if not nil) and its SERVER argument, and returns
// that server, which must use auth: {type: oauth}, with the token store;
// a nil server and an exit code when it cannot.
func oauthCommand(name string, args []string, stdout, stderr io.Writer, flags func(*flag.FlagSet)) (string, *config.Server, *oauth.Store, int) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c common
	c.register(fs)
	if flags != nil {
		flags(fs)
	}
	id, ok, code := parseServerArg(fs, args, stderr)
	if !ok {
		return "", nil, nil, code
	}
	if _, err := c.logger(stderr); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return "", nil, nil, 2
	}
	srv, store, code := oauthServer(name, &c, id, stderr)
	return id, srv, store, code
}

// parseServerArg parses a command's flags and its one SERVER argument,
// which may come before or after the flags.
func parseServerArg(fs *flag.FlagSet, args []string, stderr io.Writer) (id string, ok bool, code int) {
	fs.SetOutput(stderr)
	var rest []string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, rest = args[0], args[1:]
	} else {
		rest = args
	}
	if err := fs.Parse(rest); err != nil {
		if err == flag.ErrHelp {
			return "", false, 0
		}
		return "", false, 2
	}
	more := fs.Args()
	if id == "" && len(more) > 0 {
		id, more = more[0], more[1:]
		if err := fs.Parse(more); err != nil {
			return "", false, 2
		}
		more = fs.Args()
	}
	if len(more) > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), more[0])
		return "", false, 2
	}
	if id == "" {
		fmt.Fprintf(stderr, "%s: name the server, e.g. mcp-aggregator %s SERVER\n", fs.Name(), fs.Name())
		return "", false, 2
	}
	return id, true, 0
}

// oauthServer loads the config and returns server id, which must use
// auth: {type: oauth}, and the token store; nil and an exit code when it
// cannot, having said why on stderr.
func oauthServer(cmd string, c *common, id string, stderr io.Writer) (*config.Server, *oauth.Store, int) {
	src := c.source()
	for _, n := range src.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	ws, problems := src.Load()
	srv, store, own, err := upstreamauth.LoginTarget(ws, problems, id)
	if err != nil {
		listing.Problems(stderr, own)
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return nil, nil, 1
	}
	return srv, store, 0
}
