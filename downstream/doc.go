// Package downstream is the transports clients connect through: stdio and
// streamable HTTP, both protocol generations (session-based up to
// 2025-11-25, sessionless from 2026-07-28). It owns framing, session ids,
// Origin and Host checks, body, queue and connection limits, timeouts and
// the ordered write path of every stream, and hands each valid request to a
// Handler; the server-to-client requests it carries for the Handler it
// matches with the client's responses by id. It does no routing: messages
// in, messages out.
package downstream
