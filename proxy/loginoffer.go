package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/internal/protocol"
	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/oauth"
)

// LoginOffer starts the login of a server that needs one, or finds the one
// already under way, for a person to finish in a browser: it returns the
// authorization URL, an id for the elicitation, and what tells when the
// login ends (nil: nothing will).
type LoginOffer func(ctx context.Context, server string) (url, elicitationID string, done *LoginDone, err error)

// LoginDone is the end of an offered login: every client of a session
// generation (up to 2025-11-25) that was offered it is sent
// notifications/elicitation/complete when it succeeds, once, so that it can
// retry the call by itself. A 2026-07-28 client is sent none: it retries.
type LoginDone struct {
	done      chan struct{}
	once      sync.Once
	mu        sync.Mutex
	ok        bool
	followers map[string]bool // session keys already waiting
}

// NewLoginDone returns the end of a login under way.
func NewLoginDone() *LoginDone {
	return &LoginDone{done: make(chan struct{}), followers: map[string]bool{}}
}

// Finish ends the login: ok when it stored a grant. Calls after the first
// change nothing.
func (d *LoginDone) Finish(ok bool) {
	d.once.Do(func() {
		d.mu.Lock()
		d.ok = ok
		d.mu.Unlock()
		close(d.done)
	})
}

// follow reports whether the session with key is new to the login.
func (d *LoginDone) follow(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.followers[key] {
		return false
	}
	d.followers[key] = true
	return true
}

// notifyWhenDone sends sess notifications/elicitation/complete for id once
// the login succeeds; a login that fails, or ends after the session, sends
// nothing. It waits no longer than the login, which has a time limit.
func notifyWhenDone(sess downstream.Session, done *LoginDone, id string) {
	if sess == nil || done == nil || !done.follow(sess.Key()) {
		return
	}
	go func() {
		<-done.done
		done.mu.Lock()
		ok := done.ok
		done.mu.Unlock()
		if !ok {
			return
		}
		if msg, err := jsonrpc.Notification("notifications/elicitation/complete", map[string]string{"elicitationId": id}); err == nil {
			sess.Notify(msg)
		}
	}()
}

// codeURLElicitationRequired is MCP's URLElicitationRequiredError
// (2025-11-25): the request can be retried once the user has finished the
// elicitations its data lists.
const codeURLElicitationRequired = -32042

// loginOffer turns a call that failed for want of a login into the spec's
// URL elicitation, when the client declared URL-mode elicitation and the
// aggregator can run the login; nil otherwise.
func (p *Proxy) loginOffer(ctx context.Context, req *downstream.Request, server string, err error) *jsonrpc.Error {
	if !errors.Is(err, oauth.ErrLoginRequired) {
		return nil
	}
	message := fmt.Sprintf("MCP server %q needs you to log in. Open the link, approve the access, then try again.", server)
	if offer := p.offerLogins(ctx, req, []string{server}, message); offer != nil {
		return offer
	}
	return p.loginLink(ctx, server, err)
}

// loginLink is the answer to a client that cannot be sent a URL
// elicitation, for a server where each caller logs in: the link to open,
// in the error's message. nil for a shared login (the operator runs
// `mcp-aggregator login`), or when the login cannot be offered.
func (p *Proxy) loginLink(ctx context.Context, server string, err error) *jsonrpc.Error {
	var need *oauth.LoginRequiredError
	if p.opts.OfferLogin == nil || !errors.As(err, &need) || !need.PerUser {
		return nil
	}
	url, _, _, oerr := p.opts.OfferLogin(ctx, server)
	if oerr != nil {
		p.log.Warn("could not offer the client a login", "server", server, "err", oerr)
		return nil
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("MCP server %q needs you to log in: open %s in a browser, approve the access, then call the tool again.", server, url)}
}

// unknownToolLoginOffer answers a call of a tool no server exports, while
// servers of the caller's profile wait for a login and export nothing until
// then, with the logins of those servers as URL elicitations: the tool may
// well be one of theirs, and the client has no other way to be offered the
// login. nil when no server waits, or the client cannot be offered one; nil
// too for a 2026-07-28 request the bridge holds, whose offers are
// input_required rounds (askToolLogin) and which has had them all: -32042
// is no error of its generation.
func (p *Proxy) unknownToolLoginOffer(ctx context.Context, req *downstream.Request, st *state, tool string) *jsonrpc.Error {
	if p.opts.OfferLogin == nil || !declaresURLElicitation(capabilitiesOf(req)) ||
		(req != nil && req.Ask != nil && protocol.Modern(req.Protocol)) {
		return nil
	}
	servers := st.awaitingLoginIDs(requestClient(req))
	if len(servers) == 0 {
		return nil
	}
	quoted := make([]string, len(servers))
	for i, id := range servers {
		quoted[i] = fmt.Sprintf("%q", id)
	}
	message := fmt.Sprintf("unknown tool %q: no server exports it. MCP server %s needs you to log in, and its tools are missing until then. Open the link, approve the access, then list the tools again.",
		tool, strings.Join(quoted, ", "))
	if len(servers) > 1 {
		message = fmt.Sprintf("unknown tool %q: no server exports it. MCP servers %s need you to log in, and their tools are missing until then. Open the links, approve the access, then list the tools again.",
			tool, strings.Join(quoted, ", "))
	}
	return p.offerLogins(ctx, req, servers, message)
}

// offerLogins is the URL elicitation of the logins of servers, with
// message, when the client declared URL-mode elicitation and the aggregator
// can run at least one of the logins; nil otherwise.
func (p *Proxy) offerLogins(ctx context.Context, req *downstream.Request, servers []string, message string) *jsonrpc.Error {
	if p.opts.OfferLogin == nil || !declaresURLElicitation(capabilitiesOf(req)) {
		return nil
	}
	// 2026-07-28 dropped elicitationId and notifications/elicitation/complete:
	// its client learns that the login is done by calling again.
	modern := req != nil && protocol.Modern(req.Protocol)
	var elicitations []any
	for _, server := range servers {
		url, id, done, err := p.opts.OfferLogin(ctx, server)
		if err != nil {
			p.log.Warn("could not offer the client a login", "server", server, "err", err)
			continue
		}
		el := map[string]string{"mode": "url", "url": url,
			"message": fmt.Sprintf("Log in to MCP server %q: open the link and approve the access.", server)}
		if !modern {
			el["elicitationId"] = id
			if req != nil {
				notifyWhenDone(req.Session, done, id)
			}
		}
		elicitations = append(elicitations, el)
	}
	if len(elicitations) == 0 {
		return nil
	}
	if len(servers) == 1 {
		// One login: its elicitation says what the error says.
		elicitations[0].(map[string]string)["message"] = message
	}
	data, _ := rawjson.Marshal(map[string]any{"elicitations": elicitations})
	return &jsonrpc.Error{Code: codeURLElicitationRequired, Message: message, Data: data}
}

// capabilitiesOf is what the client of req declared.
func capabilitiesOf(req *downstream.Request) json.RawMessage {
	switch {
	case req == nil:
		return nil
	case req.ClientCapabilities != nil:
		return req.ClientCapabilities
	case req.Session != nil:
		return req.Session.ClientCapabilities()
	}
	return nil
}

// declaresURLElicitation reports whether capabilities hold elicitation.url.
func declaresURLElicitation(capabilities json.RawMessage) bool {
	var caps struct {
		Elicitation json.RawMessage `json:"elicitation"`
	}
	if json.Unmarshal(capabilities, &caps) != nil {
		return false
	}
	return declares(caps.Elicitation, "url")
}

// Bounds of a login offered to a protocol 2026-07-28 client (askLogin).
const (
	// maxLoginOffers bounds how often one request is offered a login.
	maxLoginOffers = 3
	// loginWait bounds how long the retry that accepted the offer waits for
	// the login to end before the call is tried again (and the login
	// offered again when it is still not done).
	loginWait = 45 * time.Second
)

// askLogin offers a protocol 2026-07-28 client that declared URL-mode
// elicitation, whose request the bridge holds (req.Ask), the login of
// server its call failed for (err): the client is answered input_required,
// the login's URL elicitation among its inputRequests (no elicitationId:
// 2026-07-28 has none, nor the completion notification), and its retry
// brings the answer. On accept the retry waits for the login to end (up to
// loginWait), and again is true: the caller tries the call again, with
// the new login. A decline or cancel ends the call with rpcErr, and so does
// no answer within the time an offered login lasts. handled is
// false when the request is not such a one, or has had its maxLoginOffers;
// the caller answers as for any client. offers counts the request's offers.
func (p *Proxy) askLogin(ctx context.Context, req *downstream.Request, server string, err error, offers *int) (again bool, rpcErr *jsonrpc.Error, handled bool) {
	if !errors.Is(err, oauth.ErrLoginRequired) || p.opts.OfferLogin == nil || req == nil || req.Ask == nil ||
		!protocol.Modern(req.Protocol) || !declaresURLElicitation(capabilitiesOf(req)) {
		return false, nil, false
	}
	if *offers >= maxLoginOffers {
		if link := p.loginLink(ctx, server, err); link != nil {
			return false, link, true
		}
		return false, nil, false
	}
	*offers++
	done, rpcErr, offered := p.askLoginInput(ctx, req, server,
		fmt.Sprintf("MCP server %q needs you to log in. Open the link and approve the access; the call goes on once you have.", server))
	switch {
	case !offered:
		return false, nil, false
	case rpcErr != nil:
		return false, rpcErr, true
	}
	if done != nil {
		wait := time.NewTimer(loginWait)
		defer wait.Stop()
		select {
		case <-done.done:
		case <-wait.C:
		case <-ctx.Done():
			if loginFinished(done) {
				break // a finished login is not waited for, whatever else ended
			}
			return false, errorObject(codeInternal, "server %q: the call ended while it waited for your login", server), true
		}
	}
	return true, nil, true
}

// askLoginInput asks the client of req, whose request the bridge holds, to
// open the login of server (an input_required round carrying the URL-mode
// elicitation, with message). offered is false when the login could not be
// offered; rpcErr ends the call when the client did not accept (declined,
// cancelled, no answer within the time an offered login lasts); otherwise
// the person accepted, and done tells when the login ends (nil: nothing
// will).
func (p *Proxy) askLoginInput(ctx context.Context, req *downstream.Request, server, message string) (done *LoginDone, rpcErr *jsonrpc.Error, offered bool) {
	url, _, done, oerr := p.opts.OfferLogin(ctx, server)
	if oerr != nil {
		p.log.Warn("could not offer the client a login", "server", server, "err", oerr)
		return nil, nil, false
	}
	params, merr := rawjson.Marshal(map[string]string{"mode": "url", "url": url, "message": message})
	if merr != nil {
		return nil, nil, false
	}
	// The offered login lasts no longer than this: an answer after it
	// would find it gone, and the call holds what it acquired meanwhile.
	askCtx, cancel := context.WithTimeout(ctx, oauth.DefaultLoginTimeout)
	defer cancel()
	resp, aerr := req.Ask(askCtx, "elicitation/create", params)
	switch {
	case aerr != nil && ctx.Err() == nil && errors.Is(askCtx.Err(), context.DeadlineExceeded):
		return nil, errorObject(codeInternal, "server %q needs you to log in, and the login offer got no answer within %s; call again to be offered it again", server, oauth.DefaultLoginTimeout), true
	case aerr != nil:
		// The client went away, or its retry never came (the hold ended):
		// no one waits for this answer.
		return nil, errorObject(codeInternal, "server %q needs you to log in; the login offer got no answer: %v", server, aerr), true
	case resp == nil || resp.Error != nil:
		why := "no answer"
		if resp != nil {
			why = resp.Error.Message
		}
		return nil, errorObject(codeInternal, "server %q needs you to log in, and the login could not be offered: %s", server, why), true
	}
	var answer struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(resp.Result, &answer) != nil || answer.Action != "accept" {
		return nil, errorObject(codeInternal, "server %q needs you to log in, and the login was not accepted; call again to be offered it again", server), true
	}
	return done, nil, true
}

// succeeded reports whether the login ended having stored a grant.
func (d *LoginDone) succeeded() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ok
}

// loginStartWait bounds how long the retry that accepted the login of a
// server that could not start without it waits, once the login is done,
// for the server to start and its tools to be committed.
const loginStartWait = 60 * time.Second

// askToolLogin offers a protocol 2026-07-28 client that declared URL-mode
// elicitation, whose request the bridge holds, and that called a tool no
// server exports (under st) while servers of its profile wait for a shared
// login and export nothing until then, the logins of those servers: one
// URL-mode elicitation each, in input_required. The retry that accepts
// waits for the logins it accepted to end (up to loginWait), then for the
// servers they let start to be started and committed (up to
// loginStartWait; a commit that brings the tool ends the wait at once),
// and again is true: the caller resolves the tool again, under the state
// committed meanwhile. When no offer was accepted the call ends with
// rpcErr. handled is false when the request is not such a one, no server
// waits, no login could be offered, or the request has had its
// maxLoginOffers (counted in offers, with askLogin's).
func (p *Proxy) askToolLogin(ctx context.Context, req *downstream.Request, st *state, tool string, offers *int) (again bool, rpcErr *jsonrpc.Error, handled bool) {
	if p.opts.OfferLogin == nil || req == nil || req.Ask == nil || !protocol.Modern(req.Protocol) ||
		!declaresURLElicitation(capabilitiesOf(req)) || *offers >= maxLoginOffers {
		return false, nil, false
	}
	client := requestClient(req)
	servers := st.awaitingLoginIDs(client)
	if len(servers) == 0 {
		return false, nil, false
	}
	*offers++
	type answer struct {
		done    *LoginDone
		rpcErr  *jsonrpc.Error
		offered bool
	}
	// Asked together: the client is shown every link in one round when
	// the asks meet there, as they mostly do.
	answers := make([]answer, len(servers))
	var wg sync.WaitGroup
	for i, server := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			message := fmt.Sprintf("unknown tool %q: no server exports it. MCP server %q needs you to log in, and its tools are missing until then. Open the link and approve the access; the call goes on once the server has started.", tool, server)
			var a answer
			a.done, a.rpcErr, a.offered = p.askLoginInput(ctx, req, server, message)
			answers[i] = a
		}()
	}
	wg.Wait()
	var accepted []string
	var dones []*LoginDone
	var refusal *jsonrpc.Error
	offered := false
	for i, a := range answers {
		offered = offered || a.offered
		switch {
		case !a.offered:
		case a.rpcErr != nil:
			if refusal == nil {
				refusal = a.rpcErr
			}
		default:
			accepted = append(accepted, servers[i])
			dones = append(dones, a.done)
		}
	}
	switch {
	case !offered:
		return false, nil, false
	case len(accepted) == 0:
		return false, refusal, true
	}
	// The logins first: the person finishes them in the browser.
	wait := time.NewTimer(loginWait)
	defer wait.Stop()
	var started []string
	for i, done := range dones {
		if done != nil {
			select {
			case <-done.done:
			case <-wait.C:
				return true, nil, true // not done yet: offered again
			case <-ctx.Done():
				if loginFinished(done) {
					break // a finished login is not waited for, whatever else ended
				}
				return false, errorObject(codeInternal, "unknown tool %q: the call ended while it waited for your login", tool), true
			}
			if !done.succeeded() {
				continue // nothing to start; offered again
			}
		}
		started = append(started, accepted[i])
	}
	if len(started) > 0 && !p.awaitStarted(ctx, client, tool, started) {
		return false, errorObject(codeInternal, "unknown tool %q: the call ended while it waited for the server to start after your login", tool), true
	}
	return true, nil, true
}

// awaitStarted waits, after the logins of servers ended, until the state
// committed no longer has any of them waiting for a login or starting, or
// exports tool to client, at most loginStartWait. It is false when ctx
// ended first.
func (p *Proxy) awaitStarted(ctx context.Context, client, tool string, servers []string) bool {
	limit := time.NewTimer(loginStartWait)
	defer limit.Stop()
	for {
		changed := p.commits.next() // before the state: no commit goes unseen
		st := p.current()
		if e, ok := st.catalog.Lookup(tool); ok && st.profileOf(client).tool(e) {
			return true
		}
		if !st.anyAwaitingLogin(servers) {
			return true
		}
		select {
		case <-changed:
		case <-limit.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// loginFinished reports whether done has finished, without waiting: a
// select that finds both the login done and the call's context ended may
// pick either.
func loginFinished(done *LoginDone) bool {
	select {
	case <-done.done:
		return true
	default:
		return false
	}
}
