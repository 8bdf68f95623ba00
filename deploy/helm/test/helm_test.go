package charttest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// helmModule is the helm release the chart is checked with, built from the
// Go module proxy by TestMain. $HELM names a helm binary to use instead.
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

// chartDir is the chart, relative to this module's directory.
const chartDir = "../mcp-aggregator"

// namespace is where the chart is rendered, so that names built from the
// release namespace (HAProxy's DNS name of the pods) can be checked.
const namespace = "mcp"

// helm runs helm with args and returns its standard output, or an error
// that carries its standard error.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Getenv("HELM"), args...) // set by TestMain
	// helm keeps repositories and plugins under these; nothing of the
	// user's may change what is checked, and nothing is left behind.
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// manifest is what one `helm template` rendered, each object decoded into
// its API type.
type manifest struct {
	Deployments []appsv1.Deployment
	Services    []corev1.Service
	ConfigMaps  []corev1.ConfigMap
	Secrets     []corev1.Secret
	Budgets     []policyv1.PodDisruptionBudget
	Monitors    []serviceMonitor
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) that the chart writes, with the CRD's field
// names: a field the chart writes that is not here fails the decode.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector"`
		Endpoints []monitorEndpoint `json:"endpoints"`
	} `json:"spec"`
}

// monitorEndpoint is one scrape target of a ServiceMonitor.
type monitorEndpoint struct {
	Port          string `json:"port"`
	Path          string `json:"path"`
	Scheme        string `json:"scheme"`
	Interval      string `json:"interval"`
	ScrapeTimeout string `json:"scrapeTimeout"`
	Authorization *struct {
		Type        string                    `json:"type"`
		Credentials *corev1.SecretKeySelector `json:"credentials"`
	} `json:"authorization,omitempty"`
}

// render runs helm template on the chart with the given values files and
// --set pairs, and decodes what it prints.
func render(t *testing.T, valuesFiles []string, set ...string) manifest {
	t.Helper()
	out, err := helm(t, templateArgs(valuesFiles, set)...)
	require.NoError(t, err)
	m, err := decode(out)
	require.NoError(t, err)
	return m
}

func templateArgs(valuesFiles []string, set []string) []string {
	args := []string{"template", "gw", chartDir, "--namespace", namespace}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return args
}

// documentSeparator splits a YAML stream into documents.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decode splits helm's output into documents and decodes each, strictly,
// into the API type its apiVersion and kind name.
func decode(stream string) (manifest, error) {
	var m manifest
	var errs []error
	for i, doc := range documentSeparator.Split(stream, -1) {
		if onlyComments(doc) {
			continue
		}
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
			continue
		}
		var tm metav1.TypeMeta
		if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
			continue
		}
		var into any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			into = grow(&m.Deployments)
		case "v1 Service":
			into = grow(&m.Services)
		case "v1 ConfigMap":
			into = grow(&m.ConfigMaps)
		case "v1 Secret":
			into = grow(&m.Secrets)
		case "policy/v1 PodDisruptionBudget":
			into = grow(&m.Budgets)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			into = grow(&m.Monitors)
		default:
			errs = append(errs, fmt.Errorf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind))
			continue
		}
		strict, err := kjson.UnmarshalStrict(js, into)
		if err == nil {
			err = errors.Join(strict...)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err))
		}
	}
	return m, errors.Join(errs...)
}

// onlyComments reports whether a document holds nothing but comments and
// blank lines (helm prints such ones for templates that render nothing).
func onlyComments(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// component returns the objects whose app.kubernetes.io/component label is c.
func component[T any](objs []T, meta func(*T) *metav1.ObjectMeta, c string) []T {
	var found []T
	for i := range objs {
		if meta(&objs[i]).Labels["app.kubernetes.io/component"] == c {
			found = append(found, objs[i])
		}
	}
	return found
}

func deploymentMeta(d *appsv1.Deployment) *metav1.ObjectMeta { return &d.ObjectMeta }
func serviceMeta(s *corev1.Service) *metav1.ObjectMeta       { return &s.ObjectMeta }
func configMapMeta(c *corev1.ConfigMap) *metav1.ObjectMeta   { return &c.ObjectMeta }

// grow appends a zero T to s and returns the new element, for a document
// to be decoded into.
func grow[T any](s *[]T) *T {
	*s = append(*s, *new(T))
	return &(*s)[len(*s)-1]
}
