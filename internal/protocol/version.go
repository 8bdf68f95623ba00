package protocol

import "slices"

// Versions are the protocol versions the downstream transports serve,
// newest first.
var Versions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// LatestSession is the newest version negotiable through initialize.
const LatestSession = "2025-11-25"

// FirstSessionless is the first version of the sessionless generation.
const FirstSessionless = "2026-07-28"

// Modern reports whether version belongs to the sessionless generation.
// Versions are dates, so they order as strings.
func Modern(version string) bool { return version >= FirstSessionless }

// Supported reports whether version is one the downstream transports serve.
func Supported(version string) bool { return slices.Contains(Versions, version) }

// Well-known _meta keys of the sessionless generation.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
)
