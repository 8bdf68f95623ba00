package ops

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-aggregator/mcp-aggregator/session"
)

// Descriptions of what stateCollector reads from the proxy at scrape time.
var (
	sessionsDesc = prometheus.NewDesc("mcp_aggregator_sessions",
		"Downstream sessions connected now (stdio, or HTTP sessions of the session-based protocol).", nil, nil)
	instancesDesc = prometheus.NewDesc("mcp_aggregator_upstream_instances",
		"Upstream instances running now, by server and state (shared, leased, spare, draining).", []string{"server", "state"}, nil)
	leasesDesc = prometheus.NewDesc("mcp_aggregator_leases",
		"Sessions holding a dedicated instance now, by server.", []string{"server"}, nil)
	waitingDesc = prometheus.NewDesc("mcp_aggregator_lease_waiting",
		"Calls of sessions waiting now for an instance to lease, at lease.max_instances or limits.max_instances, by server.", []string{"server"}, nil)
	upDesc = prometheus.NewDesc("mcp_aggregator_server_up",
		"1 while the server is running and healthy, 0 while it is down (restarting) or failed to start.", []string{"server"}, nil)
	toolsDesc = prometheus.NewDesc("mcp_aggregator_exported_tools",
		"Tools the server exports in the catalog now.", []string{"server"}, nil)
	rssDesc = prometheus.NewDesc("mcp_aggregator_upstream_rss_bytes",
		"Resident memory of the server's instances and the processes they started (Linux).", []string{"server"}, nil)
	readyDesc = prometheus.NewDesc("mcp_aggregator_ready",
		"1 when /readyz answers 200: the first load is done and every required server is up.", nil, nil)
	registryDesc = prometheus.NewDesc("mcp_aggregator_registry_version",
		"Commits that changed the exported catalog since the start.", nil, nil)
	drainingDesc = prometheus.NewDesc("mcp_aggregator_draining",
		"1 once the replica drains (SIGTERM or POST /drain): it refuses new sessions and exits once its calls are done or the grace is over.", nil, nil)
	buildDesc = prometheus.NewDesc("mcp_aggregator_build_info",
		"Always 1; the version label is the binary's.", []string{"version"}, nil)
)

// instanceStates are the roles an instance can have, each exported even
// when zero, so that a dashboard's series never vanish.
var instanceStates = []string{"shared", "leased", "spare", "draining"}

// stateCollector reads the gauges from the proxy when scraped, so nothing
// on the call path updates them.
type stateCollector struct{ o *Ops }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sessionsDesc, instancesDesc, leasesDesc, waitingDesc, upDesc, toolsDesc, rssDesc, readyDesc, drainingDesc, registryDesc, buildDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	o := c.o
	st := o.proxy.Status(session.Key{})
	ready, _ := o.readiness()

	ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(o.proxy.Sessions()))
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, boolValue(ready))
	ch <- prometheus.MustNewConstMetric(drainingDesc, prometheus.GaugeValue, boolValue(o.draining()))
	ch <- prometheus.MustNewConstMetric(registryDesc, prometheus.GaugeValue, float64(st.Version))
	ch <- prometheus.MustNewConstMetric(buildDesc, prometheus.GaugeValue, 1, o.opts.Version)

	type counts struct {
		roles   map[string]int
		leases  int
		waiting int
		rss     int64
	}
	per := map[string]*counts{}
	at := func(server string) *counts {
		if per[server] == nil {
			per[server] = &counts{roles: map[string]int{}}
		}
		return per[server]
	}
	for _, s := range st.Servers {
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, boolValue(serverState(s.Health) == stateOK), s.ID)
		ch <- prometheus.MustNewConstMetric(toolsDesc, prometheus.GaugeValue, float64(s.Tools), s.ID)
		if serverState(s.Health) != stateFailed {
			at(s.ID).waiting = s.Waiting
		}
	}
	for _, in := range st.Instances {
		c := at(in.Server)
		c.roles[in.Role]++
		c.rss += in.RSS
		if in.Role == "leased" {
			c.leases++
		}
	}
	servers := make([]string, 0, len(per))
	for s := range per {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, s := range servers {
		c := per[s]
		for _, role := range instanceStates {
			ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(c.roles[role]), s, role)
		}
		ch <- prometheus.MustNewConstMetric(leasesDesc, prometheus.GaugeValue, float64(c.leases), s)
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(c.waiting), s)
		ch <- prometheus.MustNewConstMetric(rssDesc, prometheus.GaugeValue, float64(c.rss), s)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func fmtArgs(v []any) string { return strings.TrimSpace(fmt.Sprintln(v...)) }
