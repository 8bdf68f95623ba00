package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusedUnknown is the log message of a request with an unknown token.
const refusedUnknown = "refused a request with an unknown bearer token"

var refusalSummary = regexp.MustCompile(`msg="` + refusedUnknown + `; more like it were not logged" .*count=(\d+)`)

// refusalLines counts the log's lines about refused unknown tokens: those
// logged one by one, and the summaries with the count they left out.
func refusalLines(log string) (shown, summaries, summarized int) {
	for _, line := range strings.Split(log, "\n") {
		if m := refusalSummary.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			summaries++
			summarized += n
		} else if strings.Contains(line, `msg="`+refusedUnknown+`"`) {
			shown++
		}
	}
	return shown, summaries, summarized
}

// TestAuthRefusalsLogBounded: a flood of requests with bogus bearer tokens
// does not become a flood of log lines: the first few are logged, the rest
// counted, and a summary line says how many were left out.
func TestAuthRefusalsLogBounded(t *testing.T) {
	t.Parallel()
	token := randomToken(t)
	a := startAggregator(t, httpTransport, aggregatorOptions{
		configs: []string{writeConfig(t, fmt.Sprintf("version: 1\nhttp: {auth: {tokens: {ops: {env: OPS_TOKEN}}}}\nservers:\n  demo:\n    truely-stateless: true\n    %s\n", demoServer("tools")))},
		env:     []string{"OPS_TOKEN=" + token}})
	a.waitLoaded()

	const requests, workers = 3000, 4
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				req, err := http.NewRequest(http.MethodPost, a.url, bytes.NewReader(body))
				if !assert.NoError(t, err) {
					continue
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", fmt.Sprintf("Bearer bogus-token-%d", i))
				resp, err := http.DefaultClient.Do(req)
				if !assert.NoError(t, err) {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		}()
	}
	for i := range requests {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	assert.Equal(t, map[int]int{http.StatusUnauthorized: requests}, statuses)

	// Every refusal is accounted for, once the summary of the last interval
	// is out.
	_, ok := a.log.waitLine(func(string) bool {
		shown, _, summarized := refusalLines(a.log.String())
		return shown+summarized >= requests
	}, startTimeout, a.exited)
	shown, summaries, summarized := refusalLines(a.log.String())
	require.True(t, ok, "the refusals were not all logged or counted: %d logged, %d in %d summaries", shown, summarized, summaries)
	assert.Equal(t, requests, shown+summarized)
	t.Logf("%d refused requests: %d lines logged one by one, %d summary lines counting %d", requests, shown, summaries, summarized)
	assert.GreaterOrEqual(t, summaries, 1, "a summary line with the count")
	assert.LessOrEqual(t, shown, 5*summaries, "at most the first five of an interval are logged one by one")
	assert.Less(t, shown+summaries, 50, "log lines for %d refused requests", requests)
	assert.NotContains(t, a.log.String(), "bogus-token-", "a token is in the log")
}
