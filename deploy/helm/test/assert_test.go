package charttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// repoRoot is the main module, relative to this module's directory.
const repoRoot = "../../.."

// one returns the only element of xs, failing the test when there is not
// exactly one.
func one[T any](t *testing.T, xs []T, what string) *T {
	t.Helper()
	require.Len(t, xs, 1, "want exactly one %s", what)
	return &xs[0]
}

// named returns the object called name.
func named[T any](t *testing.T, objs []T, meta func(*T) *metav1.ObjectMeta, name string) *T {
	t.Helper()
	for i := range objs {
		if meta(&objs[i]).Name == name {
			return &objs[i]
		}
	}
	require.Failf(t, "not rendered", "no object named %q", name)
	return nil
}

// flags maps each --name=value argument to its value (a bare --name to "").
func flags(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, _ := strings.Cut(a, "=")
		m[name] = value
	}
	return m
}

func containerPort(t *testing.T, c *corev1.Container, name string) int32 {
	t.Helper()
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
	require.GreaterOrEqual(t, i, 0, "container %s has no port named %q", c.Name, name)
	return c.Ports[i].ContainerPort
}

func volumeMount(t *testing.T, c *corev1.Container, name string) *corev1.VolumeMount {
	t.Helper()
	i := slices.IndexFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.Name == name })
	require.GreaterOrEqual(t, i, 0, "container %s mounts no volume %q", c.Name, name)
	return &c.VolumeMounts[i]
}

func volume(t *testing.T, spec corev1.PodSpec, name string) *corev1.Volume {
	t.Helper()
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	require.GreaterOrEqual(t, i, 0, "the pod has no volume %q", name)
	return &spec.Volumes[i]
}

// assertProbe checks that probe is an HTTP GET of path on a port of c.
func assertProbe(t *testing.T, c *corev1.Container, probe *corev1.Probe, path, what string) {
	t.Helper()
	if !assert.NotNil(t, probe, "no %s probe", what) || !assert.NotNil(t, probe.HTTPGet, "the %s probe is not an HTTP GET", what) {
		return
	}
	assert.Equal(t, path, probe.HTTPGet.Path, "%s probe", what)
	containerPort(t, c, probe.HTTPGet.Port.String())
}

// assertRestricted checks the restricted Pod Security Standard's demands
// on a container, with the pod's context where the container's is silent.
func assertRestricted(t *testing.T, pod *corev1.PodSecurityContext, c *corev1.SecurityContext) {
	t.Helper()
	require.NotNil(t, c, "no container securityContext")
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	nonRoot := c.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = pod.RunAsNonRoot
	}
	assert.True(t, nonRoot != nil && *nonRoot, "runAsNonRoot")
	seccomp := c.SeccompProfile
	if seccomp == nil {
		seccomp = pod.SeccompProfile
	}
	assert.True(t, seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeRuntimeDefault, "seccompProfile RuntimeDefault")
	assert.True(t, c.ReadOnlyRootFilesystem != nil && *c.ReadOnlyRootFilesystem, "readOnlyRootFilesystem")
	assert.True(t, c.AllowPrivilegeEscalation != nil && !*c.AllowPrivilegeEscalation, "allowPrivilegeEscalation false")
	if assert.NotNil(t, c.Capabilities, "capabilities") {
		assert.Contains(t, c.Capabilities.Drop, corev1.Capability("ALL"), "capabilities drop ALL")
		assert.Empty(t, c.Capabilities.Add, "capabilities added")
	}
}

// assertSelects checks that sel picks d's pods.
func assertSelects(t *testing.T, sel labels.Selector, d *appsv1.Deployment, what string) {
	t.Helper()
	assert.False(t, sel.Empty(), "%s selects every pod", what)
	assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s does not select the pods of %s", what, d.Name)
}

// assertTargetsPort checks that every port of svc leads to a named port of
// d's container.
func assertTargetsPort(t *testing.T, svc *corev1.Service, d *appsv1.Deployment) {
	t.Helper()
	c := &d.Spec.Template.Spec.Containers[0]
	require.NotEmpty(t, svc.Spec.Ports)
	for _, p := range svc.Spec.Ports {
		containerPort(t, c, p.TargetPort.String())
	}
}

// envRefs returns the NAMEs of every {env: NAME} in a decoded config, sorted.
func envRefs(node any) []string {
	var refs []string
	var walk func(any)
	walk = func(n any) {
		switch v := n.(type) {
		case map[string]any:
			if name, ok := v["env"].(string); ok && len(v) == 1 {
				refs = append(refs, name)
				return
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(node)
	sort.Strings(refs)
	return slices.Compact(refs)
}

// aggregatorBinary returns mcp-aggregator, which TestMain built or found
// in $MCP_AGGREGATOR_BIN.
func aggregatorBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("MCP_AGGREGATOR_BIN")
	require.NotEmpty(t, bin, "MCP_AGGREGATOR_BIN is set by TestMain")
	return bin
}

// haproxyCheck has haproxy -c check the rendered haproxy.cfg, when haproxy
// is installed (.ci/run installs it).
func haproxyCheck(t *testing.T, cfg string) {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Log("haproxy is not installed: haproxy.cfg is not checked by haproxy -c")
		return
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	out, err := exec.Command(bin, "-c", "-f", path).CombinedOutput()
	require.NoError(t, err, "haproxy -c:\n%s", out)
}
