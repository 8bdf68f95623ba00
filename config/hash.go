package config

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sort"
)

// hashServer returns a stable fingerprint of everything that shapes a server at run time:
// equal definitions give equal hashes whatever the key order in the YAML, while where a
// definition sits (file, line) and the id it is filed under do not count. Resolved secrets
// are hashed, never stored; validPattern is included because it changes which tools export.
func hashServer(s *Server, validPattern string) string {
	w := fingerprint{sha256.New()}
	// Each value is written with a label and a length, so no two different servers share
	// an encoding. TestHashCoversEveryField fails when a Server field is left out here.
	w.str("v", "1")
	w.flag("stateless", s.Stateless)
	w.str("transport", string(s.Transport))
	w.str("command", s.Command)
	w.list("args", s.Args)
	w.str("cwd", s.Cwd)
	w.dict("env", s.Env)
	w.list("inherit_env", s.InheritEnv)
	w.list("withheld", s.Withheld)
	w.str("url", s.URL)
	w.dict("headers", s.Headers)
	w.dict("principal_headers", s.PrincipalHeaders)
	w.str("auth.type", string(s.Auth.Type))
	w.str("auth.client_id", s.Auth.ClientID)
	w.str("auth.client_secret", s.Auth.ClientSecret)
	w.list("auth.scopes", s.Auth.Scopes)
	w.str("auth.audience", s.Auth.Audience)
	w.str("auth.token_endpoint", s.Auth.TokenEndpoint)
	w.str("auth.issuer", s.Auth.Issuer)
	w.flag("auth.per_user", s.Auth.PerUser)
	w.str("auth.client_id_url", s.Auth.ClientIDURL)
	w.str("auth.client_name", s.Auth.ClientName)
	w.str("auth.service", s.Auth.Service)
	w.str("session", s.SessionID)
	w.str("protocol", s.Protocol)
	w.flag("required", s.Required)
	w.flag("insecure", s.Insecure)
	w.num("connect_timeout", int64(s.ConnectTimeout))
	w.num("request_timeout", int64(s.RequestTimeout))
	w.num("ping_interval", int64(s.PingInterval))
	w.list("whitelist", s.Tools.Whitelist)
	w.list("blacklist", s.Tools.Blacklist)
	w.list("resources.whitelist", s.Resources.Whitelist)
	w.list("resources.blacklist", s.Resources.Blacklist)
	w.list("prompts.whitelist", s.Prompts.Whitelist)
	w.list("prompts.blacklist", s.Prompts.Blacklist)
	w.str("mode", string(s.Tools.Mode))
	w.settings("defaults", s.Tools.Defaults)
	names := make([]string, 0, len(s.Tools.Config))
	for name := range s.Tools.Config {
		names = append(names, name)
	}
	sort.Strings(names)
	w.num("config", int64(len(names)))
	for _, name := range names {
		w.settings(name, s.Tools.Config[name])
	}
	w.num("transforms", int64(len(s.Transforms)))
	for _, t := range s.Transforms {
		w.str("kind", string(t.Kind))
		w.str("add", t.Add)
		w.str("remove", t.Remove)
	}
	w.num("idle_ttl", int64(s.Lease.IdleTTL))
	w.num("lease_max", int64(s.Lease.MaxInstances))
	w.num("prewarm", int64(s.Lease.Prewarm))
	w.num("queue_timeout", int64(s.Lease.QueueTimeout))
	w.num("max_age", int64(s.Lease.MaxAge))
	w.num("max_calls", int64(s.Lease.MaxCalls))
	w.flag("lease_reminder", s.LeaseReminder)
	w.str("valid_pattern", validPattern)
	return hex.EncodeToString(w.h.Sum(nil))
}

// fingerprint writes labelled, length-prefixed values into a hash.
type fingerprint struct{ h hash.Hash }

func (w fingerprint) raw(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	w.h.Write(n[:])
	w.h.Write([]byte(s))
}

func (w fingerprint) str(label, s string) { w.raw(label); w.raw(s) }

func (w fingerprint) num(label string, v int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	w.str(label, string(b[:]))
}

func (w fingerprint) flag(label string, v bool) {
	if v {
		w.str(label, "1")
		return
	}
	w.str(label, "0")
}

func (w fingerprint) list(label string, items []string) {
	w.num(label, int64(len(items)))
	for _, s := range items {
		w.raw(s)
	}
}

func (w fingerprint) dict(label string, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w.num(label, int64(len(keys)))
	for _, k := range keys {
		w.raw(k)
		w.raw(m[k])
	}
}

func (w fingerprint) settings(label string, s ToolSettings) {
	w.num(label+".timeout", int64(s.Timeout))
	w.num(label+".max_instances", int64(s.MaxInstances))
}
