// Package session decides which upstream instance serves which downstream
// session: one shared instance for servers declared stateless, and for the
// rest a dedicated instance leased to each session on its first call, kept
// until released, idle too long, or the session ends. Instances are
// capped per server and in all, recycled by age, calls or memory, and each
// is accounted for in a Ledger.
package session
