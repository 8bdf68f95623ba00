package charttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// valueSets are the configurations the chart is checked in: its defaults,
// and three replicas behind HAProxy with a ServiceMonitor.
var valueSets = []struct {
	name     string
	files    []string
	replicas int32
	haproxy  bool
	monitor  bool
}{
	{name: "defaults", replicas: 1},
	{name: "ha", files: []string{chartDir + "/ci/ha-values.yaml"}, replicas: 3, haproxy: true, monitor: true},
}

func TestLintStrict(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir, "--namespace", namespace}
			for _, f := range vs.files {
				args = append(args, "--values", f)
			}
			_, err := helm(t, args...)
			require.NoError(t, err)
		})
	}
}

func TestRenderedObjects(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			m := render(t, vs.files)
			agg := one(t, component(m.Deployments, deploymentMeta, "aggregator"), "aggregator Deployment")
			require.NotNil(t, agg.Spec.Replicas)
			assert.Equal(t, vs.replicas, *agg.Spec.Replicas)

			checkAggregatorPod(t, agg)
			checkConfigAndSecret(t, m, agg)

			svc := one(t, component(m.Services, serviceMeta, "aggregator"), "aggregator Service")
			assertSelects(t, labels.SelectorFromSet(svc.Spec.Selector), agg, "the aggregator Service")
			assertTargetsPort(t, svc, agg)

			pdb := one(t, m.Budgets, "PodDisruptionBudget")
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			require.NoError(t, err)
			assertSelects(t, sel, agg, "the PodDisruptionBudget")
			require.NotNil(t, pdb.Spec.MaxUnavailable)
			assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())

			haproxyDeployments := component(m.Deployments, deploymentMeta, "haproxy")
			haproxyServices := component(m.Services, serviceMeta, "haproxy")
			haproxyConfigs := component(m.ConfigMaps, configMapMeta, "haproxy")
			headless := component(m.Services, serviceMeta, "aggregator-pods")
			if !vs.haproxy {
				assert.Empty(t, haproxyDeployments, "HAProxy Deployment while haproxy is disabled")
				assert.Empty(t, haproxyServices, "HAProxy Service while haproxy is disabled")
				assert.Empty(t, haproxyConfigs, "HAProxy ConfigMap while haproxy is disabled")
				assert.Empty(t, headless, "headless Service while haproxy is disabled")
			} else {
				checkHAProxy(t, m, agg, vs.replicas,
					one(t, haproxyDeployments, "HAProxy Deployment"),
					one(t, haproxyServices, "HAProxy Service"),
					one(t, haproxyConfigs, "HAProxy ConfigMap"),
					one(t, headless, "headless Service"))
			}

			if !vs.monitor {
				assert.Empty(t, m.Monitors, "ServiceMonitor while serviceMonitor is disabled")
			} else {
				checkServiceMonitor(t, m, one(t, m.Monitors, "ServiceMonitor"), svc, headless)
			}
		})
	}
}

// checkAggregatorPod checks what the aggregator's pod needs: the restricted
// security context, its probes, a config directory the kubelet can update,
// and a termination grace above the drain grace.
func checkAggregatorPod(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := one(t, spec.Containers, "aggregator container")
	assertRestricted(t, spec.SecurityContext, c.SecurityContext)
	require.NotNil(t, spec.AutomountServiceAccountToken)
	assert.False(t, *spec.AutomountServiceAccountToken, "the pods need no Kubernetes API token")

	args := flags(c.Args)
	require.NotEmpty(t, c.Args)
	assert.Equal(t, "serve", c.Args[0])
	port := containerPort(t, c, "http")
	assert.Equal(t, fmt.Sprintf("0.0.0.0:%d", port), args["--http"])

	assertProbe(t, c, c.StartupProbe, "/healthz", "startup")
	assertProbe(t, c, c.LivenessProbe, "/healthz", "liveness")
	assertProbe(t, c, c.ReadinessProbe, "/readyz?draining=404", "readiness")

	grace, err := time.ParseDuration(args["--drain-grace"])
	require.NoError(t, err, "--drain-grace")
	require.NotNil(t, spec.TerminationGracePeriodSeconds)
	kill := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		require.NotNil(t, c.Lifecycle.PreStop.Sleep, "a preStop hook other than sleep (the image has no shell)")
		kill -= time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	assert.Greater(t, kill, grace, "SIGKILL must come after the drain grace, counted from SIGTERM (after any preStop pause)")

	// The config is a ConfigMap mounted as a directory, never by subPath:
	// only then does the kubelet swap in new contents for the hot reload.
	mount := volumeMount(t, c, "config")
	assert.Empty(t, mount.SubPath, "a subPath mount does not follow ConfigMap updates")
	assert.Equal(t, mount.MountPath+"/config.yaml", args["--config"])
	require.NotNil(t, volume(t, spec, "config").ConfigMap, "the config volume is a ConfigMap")
	for k := range d.Spec.Template.Annotations {
		assert.False(t, strings.HasPrefix(k, "checksum/config"), "a config checksum would restart the pods instead of a hot reload: %s", k)
	}

	// A read-only root filesystem: /tmp is an emptyDir.
	assert.Equal(t, "/tmp", volumeMount(t, c, "tmp").MountPath)
	assert.NotNil(t, volume(t, spec, "tmp").EmptyDir, "/tmp is an emptyDir")
}

// checkConfigAndSecret checks that every {env: NAME} in the rendered config
// is a key of the Secret the pods take their environment from, and that
// mcp-aggregator check accepts the config with that environment.
func checkConfigAndSecret(t *testing.T, m manifest, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := one(t, spec.Containers, "aggregator container")
	cmName := volume(t, spec, "config").ConfigMap.Name
	cm := named(t, m.ConfigMaps, configMapMeta, cmName)
	config, ok := cm.Data["config.yaml"]
	require.True(t, ok, "ConfigMap %s has no config.yaml", cmName)

	require.NotEmpty(t, c.EnvFrom)
	require.NotNil(t, c.EnvFrom[0].SecretRef, "the first envFrom is the chart's Secret")
	secret := named(t, m.Secrets, func(s *corev1.Secret) *metav1.ObjectMeta { return &s.ObjectMeta }, c.EnvFrom[0].SecretRef.Name)

	var tree any
	require.NoError(t, yaml.Unmarshal([]byte(config), &tree))
	refs := envRefs(tree)
	require.NotEmpty(t, refs, "the config names no {env: NAME}; http.auth needs tokens")
	for _, name := range refs {
		v, ok := secret.Data[name]
		if assert.True(t, ok, "config refers to {env: %s}, which the Secret %s lacks", name, secret.Name) {
			assert.NotEmpty(t, v, "{env: %s} is empty in the Secret", name)
		}
	}

	env := make([]string, 0, len(secret.Data))
	for k, v := range secret.Data {
		env = append(env, k+"="+string(v))
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	cmd := exec.Command(aggregatorBinary(t), "check", "--config", path)
	cmd.Env = env // nothing but the Secret: the pod's environment
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "mcp-aggregator check on the rendered config:\n%s", out)
}

// checkHAProxy checks the HAProxy objects: its config finds the aggregator
// pods through the headless Service, which publishes draining pods too,
// and it runs restricted.
func checkHAProxy(t *testing.T, m manifest, agg *appsv1.Deployment, replicas int32,
	d *appsv1.Deployment, svc *corev1.Service, cm *corev1.ConfigMap, headless *corev1.Service) {
	t.Helper()
	assert.Equal(t, corev1.ClusterIPNone, headless.Spec.ClusterIP)
	assert.True(t, headless.Spec.PublishNotReadyAddresses, "a draining pod must stay in DNS to serve its sessions")
	assertSelects(t, labels.SelectorFromSet(headless.Spec.Selector), agg, "the headless Service")

	spec := d.Spec.Template.Spec
	c := one(t, spec.Containers, "HAProxy container")
	assertRestricted(t, spec.SecurityContext, c.SecurityContext)
	assertSelects(t, labels.SelectorFromSet(svc.Spec.Selector), d, "the HAProxy Service")
	assertTargetsPort(t, svc, d)
	assert.Equal(t, cm.Name, volume(t, spec, "config").ConfigMap.Name)
	require.NotNil(t, d.Spec.Replicas)
	assert.Equal(t, int32(1), *d.Spec.Replicas, "one HAProxy: each keeps its own stickiness table")

	cfg := cm.Data["haproxy.cfg"]
	require.NotEmpty(t, cfg)
	for _, want := range []string{
		"option httpchk GET /readyz?draining=404",
		"http-check disable-on-404",
		"stick match req.hdr(Mcp-Session-Id)",
		"stick store-response res.hdr(Mcp-Session-Id)",
		"retry-on conn-failure empty-response 503",
		fmt.Sprintf("bind :%d", containerPort(t, c, "http")),
	} {
		assert.True(t, strings.Contains(cfg, want), "haproxy.cfg lacks %q", want)
	}
	aggPort := containerPort(t, one(t, agg.Spec.Template.Spec.Containers, "aggregator container"), "http")
	st := regexp.MustCompile(`(?m)^\s*server-template r (\d+) (\S+):(\d+) `).FindStringSubmatch(cfg)
	require.NotNil(t, st, "no server-template in haproxy.cfg")
	slots, _ := strconv.Atoi(st[1])
	assert.GreaterOrEqual(t, slots, int(replicas), "fewer server slots than replicas")
	assert.Equal(t, headless.Name+"."+namespace+".svc.cluster.local", st[2])
	assert.Equal(t, strconv.Itoa(int(aggPort)), st[3])

	haproxyCheck(t, cfg)
}

// checkServiceMonitor checks that the ServiceMonitor scrapes /metrics through
// the aggregator Service alone, with a token the Secret holds.
func checkServiceMonitor(t *testing.T, m manifest, sm *serviceMonitor, svc *corev1.Service, headless []corev1.Service) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(svc.Labels)), "the ServiceMonitor does not select the aggregator Service")
	for _, h := range headless {
		assert.False(t, sel.Matches(labels.Set(h.Labels)), "the ServiceMonitor selects the headless Service too: every pod would be scraped twice")
	}
	assert.Equal(t, []string{namespace}, sm.Spec.NamespaceSelector.MatchNames)
	ep := one(t, sm.Spec.Endpoints, "ServiceMonitor endpoint")
	assert.Equal(t, "/metrics", ep.Path)
	assert.True(t, slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }),
		"the ServiceMonitor's port %q is not a port of the Service", ep.Port)
	require.NotNil(t, ep.Authorization, "with http.auth, /metrics needs a token")
	require.NotNil(t, ep.Authorization.Credentials)
	assert.Equal(t, "Bearer", ep.Authorization.Type)
	secret := named(t, m.Secrets, func(s *corev1.Secret) *metav1.ObjectMeta { return &s.ObjectMeta }, ep.Authorization.Credentials.Name)
	assert.Contains(t, secret.Data, ep.Authorization.Credentials.Key)
}

// TestValuesRefused checks that values the aggregator could not run with,
// and values the chart does not know (values.schema.json), stop the render
// with a message naming the value.
func TestValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"no drain grace", []string{"aggregator.drainGraceSeconds=0"}, "aggregator.drainGraceSeconds"},
		{"kill with the grace", []string{"aggregator.shutdownMarginSeconds=0"}, "aggregator.shutdownMarginSeconds"},
		{"too few HAProxy slots", []string{"haproxy.enabled=true", "replicaCount=3", "haproxy.serverSlots=2"}, "haproxy.serverSlots"},
		{"Secret key no variable can be named", []string{"secret.env.bad-name=x"}, "not an environment variable name"},
		{"misspelt value", []string{"replicaCont=3"}, "replicaCont"},
		{"grace not a number of seconds", []string{"aggregator.drainGraceSeconds=30s"}, "drainGraceSeconds"},
		{"log level the aggregator lacks", []string{"aggregator.logLevel=trace"}, "logLevel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := helm(t, templateArgs(nil, tc.set)...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestTerminationGraceFollowsDrainGrace checks that the kill comes after the
// preStop pause, the drain grace and the margin, whatever they are set to.
func TestTerminationGraceFollowsDrainGrace(t *testing.T) {
	m := render(t, nil, "aggregator.drainGraceSeconds=100", "aggregator.preStopSleepSeconds=7", "aggregator.shutdownMarginSeconds=3")
	d := one(t, component(m.Deployments, deploymentMeta, "aggregator"), "aggregator Deployment")
	c := one(t, d.Spec.Template.Spec.Containers, "aggregator container")
	assert.Equal(t, "100s", flags(c.Args)["--drain-grace"])
	require.NotNil(t, d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	assert.Equal(t, int64(110), *d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	require.NotNil(t, c.Lifecycle)
	require.NotNil(t, c.Lifecycle.PreStop.Sleep)
	assert.Equal(t, int64(7), c.Lifecycle.PreStop.Sleep.Seconds)
}

// TestExistingSecret checks a Secret the user keeps: the chart renders none,
// the pods and the ServiceMonitor take theirs, and no checksum of values
// that are not there rolls the pods.
func TestExistingSecret(t *testing.T) {
	m := render(t, nil, "secret.existingSecret=gw-tokens", "serviceMonitor.enabled=true")
	assert.Empty(t, m.Secrets)
	d := one(t, component(m.Deployments, deploymentMeta, "aggregator"), "aggregator Deployment")
	c := one(t, d.Spec.Template.Spec.Containers, "aggregator container")
	require.NotEmpty(t, c.EnvFrom)
	require.NotNil(t, c.EnvFrom[0].SecretRef)
	assert.Equal(t, "gw-tokens", c.EnvFrom[0].SecretRef.Name)
	assert.NotContains(t, d.Spec.Template.Annotations, "checksum/secret")
	ep := one(t, one(t, m.Monitors, "ServiceMonitor").Spec.Endpoints, "ServiceMonitor endpoint")
	require.NotNil(t, ep.Authorization)
	assert.Equal(t, "gw-tokens", ep.Authorization.Credentials.Name)
}

// TestServiceMonitorWithoutToken checks that an empty tokenSecret.key (for
// pods behind something else that authenticates) scrapes without a token.
func TestServiceMonitorWithoutToken(t *testing.T) {
	m := render(t, nil, "serviceMonitor.enabled=true", "serviceMonitor.tokenSecret.key=", "aggregator.allowUnauthenticated=true")
	ep := one(t, one(t, m.Monitors, "ServiceMonitor").Spec.Endpoints, "ServiceMonitor endpoint")
	assert.Nil(t, ep.Authorization)
	d := one(t, component(m.Deployments, deploymentMeta, "aggregator"), "aggregator Deployment")
	assert.Contains(t, flags(one(t, d.Spec.Template.Spec.Containers, "aggregator container").Args), "--allow-unauthenticated")
}

// TestSessionKey checks sessionKey: the Secret is mounted whole (no
// subPath, so that a rotation reaches the pods), readable by the pod's
// group alone, and named by --session-key-file; without it, no flag. And
// haproxy.sessionAffinity false leaves the stick table out.
func TestSessionKey(t *testing.T) {
	m := render(t, nil, "sessionKey.existingSecret=mcp-session-keys", "sessionKey.key=keys.txt",
		"haproxy.enabled=true", "replicaCount=2", "haproxy.sessionAffinity=false")
	d := one(t, component(m.Deployments, deploymentMeta, "aggregator"), "aggregator Deployment")
	c := one(t, d.Spec.Template.Spec.Containers, "aggregator container")
	assert.Equal(t, "/etc/mcp-aggregator-keys/keys.txt", flags(c.Args)["--session-key-file"])
	mount := volumeMount(t, c, "session-keys")
	assert.Equal(t, "/etc/mcp-aggregator-keys", mount.MountPath)
	assert.Empty(t, mount.SubPath)
	assert.True(t, mount.ReadOnly)
	vol := volume(t, d.Spec.Template.Spec, "session-keys")
	require.NotNil(t, vol.Secret)
	assert.Equal(t, "mcp-session-keys", vol.Secret.SecretName)
	require.NotNil(t, vol.Secret.DefaultMode)
	assert.Equal(t, int32(0o440), *vol.Secret.DefaultMode)
	cm := one(t, component(m.ConfigMaps, configMapMeta, "haproxy"), "HAProxy ConfigMap")
	for _, rule := range []string{"stick-table", "stick match", "stick on", "stick store-response"} {
		assert.NotContains(t, cm.Data["haproxy.cfg"], rule)
	}
	assert.Contains(t, cm.Data["haproxy.cfg"], "balance roundrobin")

	m = render(t, nil, "haproxy.enabled=true", "replicaCount=2")
	d = one(t, component(m.Deployments, deploymentMeta, "aggregator"), "aggregator Deployment")
	c = one(t, d.Spec.Template.Spec.Containers, "aggregator container")
	assert.NotContains(t, flags(c.Args), "--session-key-file")
	cm = one(t, component(m.ConfigMaps, configMapMeta, "haproxy"), "HAProxy ConfigMap")
	assert.Contains(t, cm.Data["haproxy.cfg"], "stick match req.hdr(Mcp-Session-Id)")
}
