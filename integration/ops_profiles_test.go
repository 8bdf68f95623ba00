package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// getAs fetches url with a bearer token.
func getAs(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	code, _, body := opsGetReq(t, req)
	return code, body
}

func opsGetReq(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil || b.Len() > 16<<20 {
			break
		}
	}
	return resp.StatusCode, resp.Header, []byte(b.String())
}

// TestOpsViewsRefuseProfiledClients: a client whose profile narrows what
// it sees cannot read the whole gateway through /status, /status.json or
// /metrics (other servers, their tools, problems and instances); a client
// without a profile can.
func TestOpsViewsRefuseProfiledClients(t *testing.T) {
	t.Parallel()
	a, tok, _ := startProfiles(t, profilesConfig())
	base := opsBase(a)
	for _, path := range []string{"/status.json", "/status", "/metrics"} {
		code, body := getAs(t, base+path, tok.ci)
		assert.Equal(t, http.StatusForbidden, code, "%s for ci-bot, whose profile admits demo only: %s", path, body)
		assert.NotContains(t, string(body), "counter", "%s shows ci-bot nothing of a server outside its profile", path)
		assert.Contains(t, string(body), "profiles.ci-bot", "%s: the refusal names the profile", path)

		code, body = getAs(t, base+path, tok.laptop)
		assert.Equal(t, http.StatusOK, code, "%s for laptop, which has no profile: %s", path, body)
		assert.Contains(t, string(body), "counter", "%s shows laptop every server", path)
	}
}
