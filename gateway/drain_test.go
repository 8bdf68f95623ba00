package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcp-aggregator/mcp-aggregator/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDrainOperatorWithoutAuth(t *testing.T) {
	d := NewDrainer(nil, time.Second, quiet())
	tests := []struct {
		name   string
		remote string
		header string
		want   bool
	}{
		{"loopback", "127.0.0.1:5000", "", true},
		{"loopback v6", "[::1]:5000", "", true},
		{"another host", "10.0.0.5:5000", "", false},
		{"forwarded by a proxy on the host", "127.0.0.1:5000", "X-Forwarded-For", false},
		{"Forwarded by a proxy on the host", "127.0.0.1:5000", "Forwarded", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/drain", nil)
			r.RemoteAddr = tt.remote
			if tt.header != "" {
				r.Header.Set(tt.header, "for=192.0.2.1")
			}
			msg, ok := d.operator(nil, r)
			assert.Equal(t, tt.want, ok, msg)
		})
	}
}

func TestDrainOperatorWithAuth(t *testing.T) {
	a := NewAccess(quiet(), "127.0.0.1:8080", false)
	require.NoError(t, a.Start(workspace(map[string]string{"ops": "tok-ops", "app": "tok-app"}), nil))
	d := NewDrainer(nil, time.Second, quiet())
	as := func(client string) (string, bool) {
		r := httptest.NewRequest(http.MethodPost, "/drain", nil)
		r.RemoteAddr = "127.0.0.1:5000"
		return d.operator(a, r.WithContext(identity.WithCaller(r.Context(), identity.ClientCaller(client))))
	}
	_, ok := as("ops")
	assert.False(t, ok, "no operators listed yet")
	d.SetOperators([]string{"ops"})
	_, ok = as("ops")
	assert.True(t, ok)
	msg, ok := as("app")
	assert.False(t, ok)
	assert.Contains(t, msg, "http.auth.operators")
}

func TestDrainEndpointTakesPOSTOnly(t *testing.T) {
	d := NewDrainer(nil, time.Second, quiet())
	w := httptest.NewRecorder()
	d.endpoint(nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/drain", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, http.MethodPost, w.Header().Get("Allow"))
	select {
	case <-d.Requested():
		t.Fatal("a GET began the drain")
	default:
	}
}
