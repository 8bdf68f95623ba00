package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcp-aggregator/mcp-aggregator/downstream"
	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/mcp-aggregator/mcp-aggregator/internal/jsonrpc"
	"github.com/mcp-aggregator/mcp-aggregator/session"
	"github.com/mcp-aggregator/mcp-aggregator/upstream"
)

// sessionlessCall is a 2026-07-28 tools/call of who, in the conversation
// named name.
func sessionlessCall(t *testing.T, p *Proxy, who identity.Principal, name, tool string) *jsonrpc.Message {
	t.Helper()
	params, err := json.Marshal(map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": map[string]string{LeaseMetaKey: name}})
	require.NoError(t, err)
	return p.Handle(context.Background(), &downstream.Request{Msg: &jsonrpc.Message{ID: json.RawMessage(`1`), Method: "tools/call", Params: params},
		Protocol: "2026-07-28", Principal: who, Send: func(*jsonrpc.Message) bool { return true }})
}

// A sessionless conversation (principal and lease name) has a Session in
// the registry, under its lease key, made by its first lease: the leased
// instance is bound to it. The pool's end of its last lease closes it, and
// takes it out of the registry; another conversation's stays.
func TestConversationSessionEndsWithItsLease(t *testing.T) {
	p := newTestProxy(t)
	reconcile(t, p, load(t, t.TempDir(), baseServers()))
	who := identity.Client("ci-bot")

	for _, name := range []string{"conv-a", "conv-b"} {
		resp := sessionlessCall(t, p, who, name, "ctr_get")
		require.Nil(t, resp.Error, "%+v", resp.Error)
	}
	keyA, keyB := session.NamedKey(who, "conv-a"), session.NamedKey(who, "conv-b")
	a, b := p.sessions.findConversation(keyA), p.sessions.findConversation(keyB)
	require.NotNil(t, a, "the conversation's first lease made its Session")
	require.NotNil(t, b)
	assert.NotSame(t, a, b)
	assert.Equal(t, keyA, a.tasks.Key, "its tasks are owned under its key")
	rs := p.current().servers["counter"]
	_, held := rs.pool.Held(keyA)
	require.True(t, held)
	var inst *upstream.Instance
	for _, s := range p.sessions.existing() {
		if s == a {
			a.mu.Lock()
			for i := range a.leased {
				inst = i
			}
			a.mu.Unlock()
		}
	}
	require.NotNil(t, inst, "the leased instance is bound to the conversation")
	assert.Same(t, a, p.sessions.boundTo(inst))
	assert.Empty(t, p.sessions.live(), "a conversation is sent nothing as a session")

	require.True(t, rs.pool.Release(keyA))
	assert.Nil(t, p.sessions.findConversation(keyA), "its last lease ended: the Session is closed")
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	assert.True(t, closed)
	assert.Same(t, b, p.sessions.findConversation(keyB), "another conversation keeps its own")

	resp := sessionlessCall(t, p, who, "conv-a", "ctr_get")
	require.Nil(t, resp.Error, "%+v", resp.Error)
	again := p.sessions.findConversation(keyA)
	require.NotNil(t, again)
	assert.NotSame(t, a, again, "a new lease, a new Session")
}

// The conversations of one principal are bounded: one beyond
// maxConversations is refused with an error naming the limit, once those
// that hold nothing are forgotten; another principal's are counted apart.
func TestConversationsBoundedPerPrincipal(t *testing.T) {
	p := newTestProxy(t)
	who, other := identity.Client("flood"), identity.Client("calm")
	for i := range maxConversations {
		s, err := p.sessions.conversation(session.NamedKey(who, fmt.Sprint("c", i)))
		require.NoError(t, err)
		_, err = p.tasks.Reserve(&s.tasks, "") // it holds something: a call that may create a task
		require.NoError(t, err)
	}
	_, err := p.sessions.conversation(session.NamedKey(who, "one-more"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d conversations", maxConversations))
	assert.Contains(t, err.Error(), LeaseMetaKey)

	s, err := p.sessions.conversation(session.NamedKey(who, "c7"))
	require.NoError(t, err, "a conversation already held is found")
	assert.Equal(t, session.NamedKey(who, "c7"), s.lease)
	_, err = p.sessions.conversation(session.NamedKey(other, "c1"))
	require.NoError(t, err, "another principal has room of its own")

	// Those that hold nothing make room.
	p2 := newTestProxy(t)
	for i := range maxConversations {
		_, err := p2.sessions.conversation(session.NamedKey(who, fmt.Sprint("c", i)))
		require.NoError(t, err)
	}
	_, err = p2.sessions.conversation(session.NamedKey(who, "one-more"))
	require.NoError(t, err, "empty conversations are forgotten to make room")
	assert.Equal(t, 1, p2.sessions.conversations[who])
}
