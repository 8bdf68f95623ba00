package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"sync/atomic"

	"github.com/mcp-aggregator/mcp-aggregator/internal/rawjson"
	"github.com/mcp-aggregator/mcp-aggregator/naming"
)

// Entry is one exported tool.
type Entry struct {
	Exported string
	Server   string
	Original string
	// Raw is the upstream's definition with only the name replaced.
	Raw      json.RawMessage
	Settings naming.Settings
	// TimeoutSetting names the setting Settings.Timeout comes from, as an
	// error about a call that ran past it says: tools.config.<tool>.timeout
	// or tools.defaults.timeout; "" without a timeout (the server's
	// request_timeout applies). Plan sets it with Settings, so that a call
	// makes no name of its own.
	TimeoutSetting string
	// ParamHeaders is whether Raw may mark parameters for Mcp-Param-*
	// headers (it mentions x-mcp-header): Plan reads the definition once,
	// so that a call need not scan it for a header it rarely has.
	ParamHeaders bool
	// TaskSupport is whether Raw's execution.taskSupport lets a call run
	// as a task ("optional" or "required"): Plan reads it once, so that a
	// call from a client that may run it as one need not scan Raw for it.
	TaskSupport bool
	// App is the exported ui:// resource URI the tool's _meta points at
	// (MCP Apps); "" for a tool that is no app's.
	App string

	// observed is what an observer keeps of the entry (see Observed).
	observed atomic.Pointer[observation]
}

// observation is a value an observer keeps on an entry, and whose it is.
type observation struct{ owner, value any }

// Observed returns the value owner last stored on e with Observe; nil when
// it stored none, or another owner stored one since. An observer of calls
// (the metrics recorder) keeps its per-tool state here, found with one
// load, instead of in a table of its own looked up per call.
func (e *Entry) Observed(owner any) any {
	if o := e.observed.Load(); o != nil && o.owner == owner {
		return o.value
	}
	return nil
}

// Observe stores value on e for owner, in place of what any owner stored;
// a nil value removes owner's.
func (e *Entry) Observe(owner, value any) {
	if value == nil {
		if o := e.observed.Load(); o != nil && o.owner == owner {
			e.observed.CompareAndSwap(o, nil)
		}
		return
	}
	e.observed.Store(&observation{owner: owner, value: value})
}

// Catalog is an immutable snapshot of every exported tool. A commit builds a
// new Catalog and swaps it in; readers never lock.
type Catalog struct {
	entries  map[string]*Entry
	byServer map[string][]*Entry // in upstream order
	servers  []string            // commit order, for deterministic listing
	// result is tools/list's result, {"tools":[...]}, rendered once per
	// commit; list is its tools array.
	result, list json.RawMessage
}

// Empty is the catalog of no tools, rendered.
func Empty() *Catalog {
	c := &Catalog{entries: map[string]*Entry{}, byServer: map[string][]*Entry{}}
	c.Render()
	return c
}

// Lookup returns the entry exported under name.
func (c *Catalog) Lookup(name string) (*Entry, bool) {
	e, ok := c.entries[name]
	return e, ok
}

// LookupBytes is Lookup of a name given as bytes, which it does not copy.
func (c *Catalog) LookupBytes(name []byte) (*Entry, bool) {
	e, ok := c.entries[string(name)]
	return e, ok
}

// Owner reports which server exports name.
func (c *Catalog) Owner(name string) (string, bool) {
	if e, ok := c.entries[name]; ok {
		return e.Server, true
	}
	return "", false
}

// Server returns the entries one server exports.
func (c *Catalog) Server(id string) []*Entry { return c.byServer[id] }

// Len is the number of exported tools.
func (c *Catalog) Len() int { return len(c.entries) }

// ToolsJSON is the JSON array answered to tools/list.
func (c *Catalog) ToolsJSON() json.RawMessage { return c.list }

// ToolsResult is tools/list's whole result. Like ToolsJSON, it is shared:
// never write into it.
func (c *Catalog) ToolsResult() json.RawMessage { return c.result }

// Entries lists every entry in listing order.
func (c *Catalog) Entries() []*Entry {
	out := make([]*Entry, 0, len(c.entries))
	for _, s := range c.servers {
		out = append(out, c.byServer[s]...)
	}
	return out
}

// WithServer returns a copy of c in which server's entries are replaced by
// entries (nil removes the server).
func (c *Catalog) WithServer(server string, entries []*Entry) *Catalog {
	n := &Catalog{entries: make(map[string]*Entry, len(c.entries)+len(entries)), byServer: make(map[string][]*Entry, len(c.byServer)+1)}
	for _, s := range c.servers {
		if s == server {
			continue
		}
		n.servers = append(n.servers, s)
		n.byServer[s] = c.byServer[s]
		for _, e := range c.byServer[s] {
			n.entries[e.Exported] = e
		}
	}
	if entries != nil {
		n.servers = append(n.servers, server)
		n.byServer[server] = entries
		for _, e := range entries {
			n.entries[e.Exported] = e
		}
	}
	return n
}

// WithOrder reorders servers to follow order (servers not listed keep their
// relative place at the end).
func (c *Catalog) WithOrder(order []string) {
	rank := map[string]int{}
	for i, s := range order {
		rank[s] = i
	}
	sort.SliceStable(c.servers, func(i, j int) bool {
		ri, oki := rank[c.servers[i]]
		rj, okj := rank[c.servers[j]]
		if oki != okj {
			return oki
		}
		return ri < rj
	})
}

// Render renders tools/list's result once, after the last WithServer or
// WithOrder of a commit.
func (c *Catalog) Render() {
	var b bytes.Buffer
	b.WriteString(ToolsResultPrefix)
	b.WriteByte('[')
	first := true
	for _, s := range c.servers {
		for _, e := range c.byServer[s] {
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.Write(e.Raw)
		}
	}
	b.WriteByte(']')
	c.result, c.list = ToolsResult(&b)
}

// ToolsResultPrefix opens tools/list's result.
const ToolsResultPrefix = `{"tools":`

// ToolsResult closes the result b holds, ToolsResultPrefix and a tools
// array, and returns it and its array. Neither has room to append to: an
// append copies, and never writes into what other requests share.
func ToolsResult(b *bytes.Buffer) (result, list json.RawMessage) {
	b.WriteByte('}')
	result = b.Bytes()
	result = result[:len(result):len(result)]
	return result, result[len(ToolsResultPrefix) : len(result)-1 : len(result)-1]
}

// SameSurface reports whether two catalogs look the same to a client:
// the same names with byte-identical definitions, in any order.
func SameSurface(a, b *Catalog) bool {
	if len(a.entries) != len(b.entries) {
		return false
	}
	for name, ea := range a.entries {
		eb, ok := b.entries[name]
		if !ok || !bytes.Equal(ea.Raw, eb.Raw) {
			return false
		}
	}
	return true
}

// Renamed returns raw with its top-level "name" member set to name. Every
// other byte, key order included, stays as the upstream sent it.
func Renamed(raw json.RawMessage, name string) (json.RawMessage, error) {
	quoted := rawjson.AppendString(nil, name)
	out, ok := rawjson.Replace(raw, "name", func([]byte) ([]byte, bool) { return quoted, true })
	if !ok {
		return nil, errors.New("tool definition is not a JSON object with a name")
	}
	return out, nil
}
