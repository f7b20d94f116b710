// Package kubernetes_test validates rpd.yaml against the Kubernetes API
// types: every document decodes strictly (an unknown or misspelt field
// fails, as kubectl apply --validate=strict would), and the objects agree
// with each other and with what docs/operations.md promises. It is a module
// of its own so that rpd's module does not depend on the Kubernetes API.
//
//	cd deploy/kubernetes && go test ./...
package kubernetes_test

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// objects decodes every document of the manifest into its API type.
func objects(t *testing.T, path string) []any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s document %d: %v", path, i+1, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "cert-manager.io/v1 Certificate":
			obj = &certificate{}
		default:
			t.Fatalf("%s document %d: %s %s is not one the test knows; add it", path, i+1, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", path, i+1, tm.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

func TestManifest(t *testing.T) {
	var (
		sa     *corev1.ServiceAccount
		cm     *corev1.ConfigMap
		svc    *corev1.Service
		deploy *appsv1.Deployment
		pdb    *policyv1.PodDisruptionBudget
		certs  []*certificate
	)
	for _, o := range objects(t, "rpd.yaml") {
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			sa = o
		case *corev1.ConfigMap:
			cm = o
		case *corev1.Service:
			svc = o
		case *appsv1.Deployment:
			deploy = o
		case *policyv1.PodDisruptionBudget:
			pdb = o
		case *certificate:
			certs = append(certs, o)
		}
	}
	if sa == nil || cm == nil || svc == nil || deploy == nil || pdb == nil {
		t.Fatalf("rpd.yaml lacks one of ServiceAccount, ConfigMap, Service, Deployment, PodDisruptionBudget")
	}
	pod := deploy.Spec.Template
	podLabels := labels.Set(pod.Labels)
	sel, err := metav1.LabelSelectorAsSelector(deploy.Spec.Selector)
	if err != nil || !sel.Matches(podLabels) {
		t.Errorf("the Deployment's selector %v does not match its pods' labels %v", deploy.Spec.Selector, pod.Labels)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("the Service's selector %v does not match the pods' labels %v", svc.Spec.Selector, pod.Labels)
	}
	if s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !s.Matches(podLabels) {
		t.Errorf("the PodDisruptionBudget's selector does not match the pods")
	}

	spec := pod.Spec
	if spec.ServiceAccountName != sa.Name {
		t.Errorf("serviceAccountName %q; want the ServiceAccount %q (IRSA)", spec.ServiceAccountName, sa.Name)
	}
	if sa.Annotations["eks.amazonaws.com/role-arn"] == "" {
		t.Error("the ServiceAccount names no IAM role (eks.amazonaws.com/role-arn)")
	}
	for what, v := range map[string]*bool{"pod": spec.AutomountServiceAccountToken, "ServiceAccount": sa.AutomountServiceAccountToken} {
		if v == nil || *v {
			t.Errorf("the %s mounts the Kubernetes API token; rpd never calls the API: set automountServiceAccountToken: false", what)
		}
	}
	if len(spec.TopologySpreadConstraints) == 0 {
		t.Error("no topologySpreadConstraints: replicas may share a node or a zone")
	}
	for _, c := range spec.TopologySpreadConstraints {
		if s, err := metav1.LabelSelectorAsSelector(c.LabelSelector); err != nil || !s.Matches(podLabels) {
			t.Errorf("topology spread on %s selects other pods than rpd's", c.TopologyKey)
		}
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers; want rpd alone", len(spec.Containers))
	}
	c := spec.Containers[0]
	if tag := imageTag(c.Image); tag == "" || tag == "latest" {
		t.Errorf("image %q: pin a release tag or a digest, not :latest", c.Image)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		switch {
		case p == nil:
			t.Errorf("no %s probe", name)
		case p.TimeoutSeconds < 2:
			t.Errorf("%s probe timeout %ds: the leader's /readyz writes to the backend; give it at least 2 s", name, p.TimeoutSeconds)
		case p.PeriodSeconds < 5:
			t.Errorf("%s probe every %ds: on the leader each /readyz writes a probe record", name, p.PeriodSeconds)
		}
	}
	if strings.Join(c.Args, " ") == "" || !strings.Contains(strings.Join(c.Args, " "), "/etc/rpd") {
		t.Errorf("args %q do not run the configuration mounted at /etc/rpd", c.Args)
	}
	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = true
	}
	for _, v := range spec.Volumes {
		if !mounted[v.Name] {
			t.Errorf("volume %s is mounted nowhere", v.Name)
		}
		if v.ConfigMap != nil && v.ConfigMap.Name != cm.Name {
			t.Errorf("volume %s names ConfigMap %s; the manifest has %s", v.Name, v.ConfigMap.Name, cm.Name)
		}
		if v.Secret != nil && strings.Contains(v.Name, "tls") && !slices.ContainsFunc(certs, func(c *certificate) bool { return c.Spec.SecretName == v.Secret.SecretName }) {
			t.Errorf("volume %s mounts secret %s, which no Certificate of the manifest makes", v.Name, v.Secret.SecretName)
		}
	}
	if s := c.SecurityContext; s == nil || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
		t.Error("the container may write its root filesystem or escalate privileges")
	}
	if u := deploy.Spec.Strategy.RollingUpdate; u == nil || u.MaxUnavailable == nil || u.MaxUnavailable.IntValue() != 0 {
		t.Error("the rolling update may stop an old replica before a new one is ready; set maxUnavailable: 0 (docs/operations.md)")
	}
}

// certificate is cert-manager's Certificate (cert-manager.io/v1), the
// fields the manifest may use: decoded strictly, a misspelt one fails
// here too, without depending on cert-manager's module.
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string   `json:"secretName"`
		Duration    string   `json:"duration,omitempty"`
		RenewBefore string   `json:"renewBefore,omitempty"`
		CommonName  string   `json:"commonName,omitempty"`
		DNSNames    []string `json:"dnsNames,omitempty"`
		IPAddresses []string `json:"ipAddresses,omitempty"`
		Usages      []string `json:"usages,omitempty"`
		PrivateKey  *struct {
			Algorithm      string `json:"algorithm,omitempty"`
			Size           int    `json:"size,omitempty"`
			Encoding       string `json:"encoding,omitempty"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey,omitempty"`
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind,omitempty"`
			Group string `json:"group,omitempty"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// imageTag is the tag of an image reference ("" when none; a digest counts
// as pinned).
func imageTag(image string) string {
	if _, digest, ok := strings.Cut(image, "@"); ok {
		return digest
	}
	name := image[strings.LastIndex(image, "/")+1:]
	if _, tag, ok := strings.Cut(name, ":"); ok {
		return tag
	}
	return ""
}

func TestImageTag(t *testing.T) {
	for in, want := range map[string]string{
		"ghcr.io/rpdhq/rpd:v0.1.0":         "v0.1.0",
		"ghcr.io/rpdhq/rpd":                "",
		"localhost:5000/rpd:latest":        "latest",
		"ghcr.io/rpdhq/rpd@sha256:0123abc": "sha256:0123abc",
	} {
		if got := imageTag(in); got != want {
			t.Errorf("imageTag(%q) = %q; want %q", in, got, want)
		}
	}
}
