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
		{"another's secret passes by its name alone", config.Server{InheritEnv: []string{"*"}, Withheld: []string{"HOST_SECRET", "AWS_REGION", "LC_ALL"}},
			append([]string{"OTEL_EXPORTER_OTLP_HEADERS=x-api-key=k"}, host...),
			[]string{"AWS_SECRET_ACCESS_KEY=aws-secret", "HOME=/home/u", "KUBECONFIG=/k",
				"LANG=C.UTF-8", "LC_ALL=C", "OVERRIDDEN=host", "PATH=/usr/bin", "TMPDIR=/tmp"}},
		{"named exactly, it passes", config.Server{InheritEnv: []string{"AWS_*", "HOST_SECRET", "OTEL_EXPORTER_OTLP_HEADERS"}, Withheld: []string{"HOST_SECRET", "AWS_REGION"}},
			append([]string{"OTEL_EXPORTER_OTLP_HEADERS=x-api-key=k"}, host...),
			[]string{"AWS_SECRET_ACCESS_KEY=aws-secret", "HOME=/home/u", "HOST_SECRET=only-for-a", "LANG=C.UTF-8", "LC_ALL=C",
				"OTEL_EXPORTER_OTLP_HEADERS=x-api-key=k", "PATH=/usr/bin", "TMPDIR=/tmp"}},
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

func TestInheritedSecrets(t *testing.T) {
	srv := &config.Server{Env: map[string]string{"OWN_TOKEN": "own-value-123"}}
	env := []string{"PATH=/usr/bin", "HOME=/home/someone", "OWN_TOKEN=own-value-123",
		"AWS_SECRET_ACCESS_KEY=aws-secret-1", "GITHUB_TOKEN=ghp-2", "NPM_AUTH=npm-3", "OPENAI_APIKEY=sk-4",
		"AWS_DEFAULT_REGION=eu-central-1", "KUBECONFIG=/home/someone/.kube/config", "EMPTY_TOKEN=",
		"HTTPS_PROXY=http://proxyuser:proxypw-5@proxy:3128", "SITE=https://example.com/x"}
	assert.ElementsMatch(t, []string{"aws-secret-1", "ghp-2", "npm-3", "sk-4", "proxyuser:proxypw-5", "proxypw-5"},
		inheritedSecrets(srv, env))
	assert.False(t, config.SecretName("KEYBOARD_LAYOUT"))
	assert.True(t, config.SecretName("mytoken"))
}
