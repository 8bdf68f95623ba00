package upstreamauth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mcp-aggregator/mcp-aggregator/config"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
)

// LoginTarget finds server id of ws for `login` and `logout`: one that
// takes the aggregator's shared login (auth: {type: oauth}, and not a
// per-caller login alone), with the token store that login is kept in.
// ws and problems are what loading the config gave (ws may be nil). When
// id cannot be logged in to, err says why and how to fix it, after the
// problems of the config that keep the server from being used, if any,
// which are to be shown before it.
func LoginTarget(ws *config.Workspace, problems []config.Problem, id string) (srv *config.Server, store *oauth.Store, own []config.Problem, err error) {
	var withOAuth []string
	if ws != nil {
		for _, s := range ws.Servers {
			if s.ID == id {
				srv = s
			}
			if s.Auth.Type == config.ServerAuthOAuth {
				withOAuth = append(withOAuth, s.ID)
			}
		}
	}
	if srv == nil {
		// The server's own problems, and those of the whole config, say
		// why it is not there better than "no such server" would.
		for _, p := range problems {
			if p.Server == id || p.Server == "" && p.Severity == config.SeverityError {
				own = append(own, p)
			}
		}
		if len(own) > 0 {
			return nil, nil, own, fmt.Errorf("server %q cannot be used until the config problems above are fixed", id)
		}
		sort.Strings(withOAuth)
		hint := "no server in the config has auth: {type: oauth}"
		if len(withOAuth) > 0 {
			hint = "servers with auth: {type: oauth}: " + strings.Join(withOAuth, ", ")
		}
		return nil, nil, nil, fmt.Errorf("no server %q in the config (%s)", id, hint)
	}
	if srv.Auth.Type != config.ServerAuthOAuth {
		return nil, nil, nil, fmt.Errorf("server %q does not use OAuth; add auth: {type: oauth} to its config if it needs a login", id)
	}
	if srv.Auth.PerUser && srv.Auth.Service != config.ServiceLogin {
		return nil, nil, nil, fmt.Errorf("server %q keeps a login per caller (auth.per_user): each person logs in through the link the gateway offers when they call its tools (auth.service: login takes the aggregator's own login too, for the requests no caller made)", id)
	}
	dir, err := oauth.DefaultDir()
	if err != nil {
		return nil, nil, nil, err
	}
	return srv, oauth.NewStore(dir), nil, nil
}
