package charttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"
)

// TestHAProxyFindsPodsByDNS runs the HAProxy config the chart renders in
// front of two real aggregators, with a DNS server standing in for the
// cluster's that answers the headless Service's name with both addresses,
// as CoreDNS does: HAProxy must fill its server slots from it, spread new
// sessions over both replicas, and keep every session on the replica that
// created it.
func TestHAProxyFindsPodsByDNS(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed (.ci/run installs it)")
	}
	// Two pods: two loopback addresses, one port, as pods share theirs.
	pods := []string{"127.0.0.2", "127.0.0.3"}
	port := commonFreePort(t, pods)
	bin := aggregatorBinary(t)
	config := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte("version: 1\nservers: {}\n"), 0o600))
	for i, ip := range pods {
		// Each replica names its sessions r<i>-..., so the test can tell who made them.
		startProcess(t, fmt.Sprintf("replica %d", i+1), bin, "serve", "--config", config,
			"--http", net.JoinHostPort(ip, strconv.Itoa(port)), fmt.Sprintf("--session-id-prefix=r%d-", i+1))
	}

	fqdn := "gw-mcp-aggregator-pods." + namespace + ".svc.cluster.local."
	dns := serveDNS(t, fqdn, pods)

	front, health := freePort(t), freePort(t)
	m := render(t, nil, "haproxy.enabled=true", "replicaCount=2",
		"aggregator.port="+strconv.Itoa(port), "haproxy.port="+strconv.Itoa(front),
		"haproxy.healthPort="+strconv.Itoa(health), "haproxy.checkInterval=200ms")
	cfg := one(t, component(m.ConfigMaps, configMapMeta, "haproxy"), "HAProxy ConfigMap").Data["haproxy.cfg"]
	// The pod's resolv.conf names the cluster's DNS; here it is the stand-in.
	require.Contains(t, cfg, "    parse-resolv-conf\n")
	cfg = strings.Replace(cfg, "    parse-resolv-conf\n", "    nameserver stand-in "+dns+"\n", 1)
	cfgPath := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	startProcess(t, "haproxy", haproxy, "-db", "-f", cfgPath)

	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", front)
	// HAProxy resolves the name and checks /readyz of both replicas before
	// it sends them sessions: wait until both have answered an initialize.
	seen := map[string]bool{}
	var sessions []string
	require.Eventually(t, func() bool {
		id, ok := initialize(url)
		if ok {
			sessions = append(sessions, id)
			seen[strings.SplitN(id, "-", 2)[0]] = true
		}
		return seen["r1"] && seen["r2"]
	}, 20*time.Second, 50*time.Millisecond, "new sessions did not reach both replicas")

	for range 10 {
		id, ok := initialize(url)
		require.True(t, ok)
		sessions = append(sessions, id)
	}
	// Several requests in a row per session: round robin alone would send
	// some of them to the other replica, which answers 404.
	for _, id := range sessions {
		for range 3 {
			assert.Equal(t, http.StatusOK, toolsList(t, url, id), "session %s was not sent to the replica that holds it", id)
		}
	}
}

// initialize opens a session through url and returns its id.
func initialize(url string) (string, bool) {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"chart-test","version":"0"}}}`
	resp, err := post(url, "", body)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	id := resp.Header.Get("Mcp-Session-Id")
	return id, resp.StatusCode == http.StatusOK && id != ""
}

// toolsList lists the tools in session id and returns the HTTP status: 404
// means the request reached a replica that does not hold the session.
func toolsList(t *testing.T, url, id string) int {
	t.Helper()
	resp, err := post(url, id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func post(url, session, body string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	// Read the body before the context ends it.
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, err
}

// startProcess starts a process that runs until the test ends, with its
// output in the test log when the test fails.
func startProcess(t *testing.T, what, name string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start(), what)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", what, out.String())
		}
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// commonFreePort returns a port free on every one of ips.
func commonFreePort(t *testing.T, ips []string) int {
	t.Helper()
	for range 20 {
		port := freePort(t)
		free := true
		for _, ip := range ips {
			ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return port
		}
	}
	require.FailNow(t, "no port free on every address")
	return 0
}

// serveDNS answers A queries for name with addrs, AAAA queries for it with
// nothing, and every other name with NXDOMAIN, until the test ends. It
// returns its address.
func serveDNS(t *testing.T, name string, addrs []string) string {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return // closed
			}
			if reply, err := answer(buf[:n], name, addrs); err == nil {
				_, _ = conn.WriteTo(reply, from)
			}
		}
	}()
	return conn.LocalAddr().String()
}

func answer(query []byte, name string, addrs []string) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	known := strings.EqualFold(q.Name.String(), name)
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if known && q.Type == dnsmessage.TypeA {
		for _, a := range addrs {
			ip := net.ParseIP(a).To4()
			rr := dnsmessage.AResource{A: [4]byte{ip[0], ip[1], ip[2], ip[3]}}
			if err := b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}, rr); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}
