// Package bridge is the generation bridge: it holds the requests of
// protocol 2026-07-28 clients (tools/call, prompts/get, resources/read)
// while the older-generation upstream serving them awaits input, answers
// the client with an input_required result and a requestState, and hands
// the answers its retry brings back to the upstream. It bounds what it
// holds (per caller, in all, rounds, open inputs, the hold) and checks
// every requestState (caller, request, round, single use). Who the caller
// is, what a request declares and where log messages go are the proxy's to
// say (Config).
package bridge
