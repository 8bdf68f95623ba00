package proxy

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcp-aggregator/mcp-aggregator/catalog"
	"github.com/mcp-aggregator/mcp-aggregator/downstream"
)

// A name a client's profile hides is answered exactly as a name that does
// not exist: the same error code, the same message with the same hints,
// the same suggestions drawn from what the client may see. Anything else
// would tell one tenant of a shared gateway what the others have. The
// operator still learns of it, from a log line (hiddenNames) and, for
// tools, from the call counted under the tool's own name.

// Kinds of hidden names, as the log line names them.
const (
	hiddenTool     = "tool"
	hiddenPrompt   = "prompt"
	hiddenResource = "resource"
	hiddenTemplate = "resource template"
)

// hiddenNameLogEvery is how often one client's request for one hidden name
// is logged; the requests in between are counted in the next line.
const hiddenNameLogEvery = time.Minute

// maxHiddenNameKeys bounds the client and name pairs hiddenNames keeps:
// a URI that matches a hidden template is the client's to choose.
const maxHiddenNameKeys = 256

// maxLoggedNameLen bounds the name a hidden-name line quotes.
const maxLoggedNameLen = 200

// hiddenNames throttles the log lines about hidden names: at most one a
// minute for each client and name, and at most maxHiddenNameKeys pairs a
// minute in all, so that a client probing names cannot flood the log.
type hiddenNames struct {
	mu      sync.Mutex
	last    map[string]time.Time // client + kind + name -> when last logged
	skipped map[string]int       // the same keys -> requests not logged since
	dropped int                  // requests not logged because last was full
}

// allow reports whether a line for key may be logged at now and, if so,
// how many requests of the same key were left out since the last one, and
// how many of any key were left out because too many keys were in play.
func (h *hiddenNames) allow(key string, now time.Time) (ok bool, skipped, dropped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		h.last, h.skipped = map[string]time.Time{}, map[string]int{}
	}
	if at, seen := h.last[key]; seen && now.Sub(at) < hiddenNameLogEvery {
		h.skipped[key]++
		return false, 0, 0
	}
	if _, seen := h.last[key]; !seen && len(h.last) >= maxHiddenNameKeys {
		for k, at := range h.last {
			if now.Sub(at) >= hiddenNameLogEvery {
				delete(h.last, k)
				delete(h.skipped, k)
			}
		}
		if len(h.last) >= maxHiddenNameKeys {
			h.dropped++
			return false, 0, 0
		}
	}
	skipped, dropped = h.skipped[key], h.dropped
	h.last[key], h.dropped = now, 0
	delete(h.skipped, key)
	return true, skipped, dropped
}

// hiddenName tells the operator that req's client asked for a name of kind
// that its profile hides, offered by server, and was answered as if the
// name did not exist.
func (p *Proxy) hiddenName(req *downstream.Request, kind, name, server string) {
	client := requestClient(req)
	ok, skipped, dropped := p.hidden.allow(client+"\x00"+kind+"\x00"+name, time.Now())
	if !ok {
		return
	}
	args := []any{"client", client, "kind", kind, "name", truncatedName(name), "server", server,
		"fix", "add the server (and, for a tool, a matching pattern) to profiles." + client + " if the client is to use it"}
	if skipped > 0 {
		args = append(args, "suppressed", skipped)
	}
	if dropped > 0 {
		args = append(args, "suppressed_other_names", dropped)
	}
	p.log.Warn("a client asked for a name its profile hides; it was told the name does not exist", args...)
}

// noteHidden tells the operator of req's request for name, of kind, when
// the first of owners that finds name in the whole gateway's surface under
// st finds it on a server the client's profile leaves out.
func (p *Proxy) noteHidden(req *downstream.Request, st *state, kind, name string, owners ...func(*catalog.Surface, string) (string, bool)) {
	for _, owner := range owners {
		if server, ok := owner(st.surface, name); ok {
			if !st.profileOf(requestClient(req)).server(server) {
				p.hiddenName(req, kind, name, server)
			}
			return
		}
	}
}

// truncatedName is name cut to maxLoggedNameLen bytes at a rune boundary.
func truncatedName(name string) string {
	if len(name) <= maxLoggedNameLen {
		return name
	}
	cut := maxLoggedNameLen
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}
