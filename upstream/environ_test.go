package upstream

import (
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcp-aggregator/mcp-aggregator/config"
)

func TestProcessEnv(t *testing.T) {
	host := []string{
		"HOME=/home/u", "PATH=/usr/bin", "LANG=C.UTF-8", "LC_ALL=C", "TMPDIR=/tmp",
		"AWS_SECRET_ACCESS_KEY=aws-secret", "AWS_REGION=eu-west-1", "HOST_SECRET=only-for-a",
		"OVERRIDDEN=host", "KUBECONFIG=/k", "BASH_FUNC_x%%=() { :; }", "NOEQUALS",
	}
	tests := []struct {
		name string
		srv  config.Server
		host []string
		want []string
	}{
		{"safe base and own env only", config.Server{Env: map[string]string{"TOKEN": "only-for-a", "OVERRIDDEN": "server"}}, host,
			[]string{"HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "OVERRIDDEN=server", "PATH=/usr/bin", "TMPDIR=/tmp", "TOKEN=only-for-a"}},
		{"names and patterns widen it", config.Server{InheritEnv: []string{"AWS_*", "KUBECONFIG"}}, host,
			[]string{"AWS_REGION=eu-west-1", "AWS_SECRET_ACCESS_KEY=aws-secret", "HOME=/home/u", "KUBECONFIG=/k", "LANG=C.UTF-8", "LC_ALL=C", "PATH=/usr/bin", "TMPDIR=/tmp"}},
		{"inherit everything", config.Server{InheritEnv: []string{"*"}, Env: map[string]string{"OVERRIDDEN": "server"}}, host,
			[]string{"AWS_REGION=eu-west-1", "AWS_SECRET_ACCESS_KEY=aws-secret", "HOME=/home/u", "HOST_SECRET=only-for-a", "KUBECONFIG=/k",
				"LANG=C.UTF-8", "LC_ALL=C", "OVERRIDDEN=server", "PATH=/usr/bin", "TMPDIR=/tmp"}},
		{"the host's list reaches every server", config.Server{}, append([]string{InheritEnvVar + "=KUBECONFIG,AWS_REGION"}, host...),
			[]string{"AWS_REGION=eu-west-1", "HOME=/home/u", "KUBECONFIG=/k", "LANG=C.UTF-8", "LC_ALL=C", "PATH=/usr/bin", "TMPDIR=/tmp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := processEnv(&tt.srv, tt.host)
			sort.Strings(got)
			assert.Equal(t, tt.want, got)
			for _, kv := range got {
				assert.False(t, strings.HasPrefix(kv, "BASH_FUNC"), "exported shell functions are never passed on")
			}
		})
	}
}
