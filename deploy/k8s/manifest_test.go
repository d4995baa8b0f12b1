// Package k8s_test renders every kustomize overlay with kustomize's Go API (krusty), decodes each
// object strictly into its k8s.io/api type (unknown fields fail), and checks what a cluster
// running the "restricted" Pod Security Standard and an operator need: probes, resources,
// numeric non-root users, dropped capabilities, seccomp, read-only root filesystems, pinned
// images, secrets that exist, selectors that select, and the GKE objects (Gateway, PodMonitoring,
// SecretProviderClass) wired to what exists. Custom resources without Go types in go.mod are
// decoded into unstructured objects and checked field by field.
package k8s_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The image every Cohort container runs (kustomize's images: rewrites it per overlay), its user
// (deploy/Dockerfile: USER 65532:65532) and the production overlay.
const (
	cohortImage = "cohort"
	cohortUID   = 65532
)

type overlay struct {
	dir        string
	production bool // pinned registry images, GKE objects, Secret Manager, Cloud SQL proxy
}

var overlays = []overlay{
	{dir: "overlays/dev"},
	{dir: "overlays/gke", production: true},
	{dir: "overlays/gke-key-rotation", production: true},
}

// TestOverlays renders each overlay from disk and requires no problem at all.
func TestOverlays(t *testing.T) {
	for _, o := range overlays {
		t.Run(o.dir, func(t *testing.T) {
			m, err := render(filesys.MakeFsOnDisk(), o.dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.objects) == 0 {
				t.Fatal("overlay rendered no objects")
			}
			for _, p := range check(m, o) {
				t.Error(p)
			}
			if o.production {
				for _, p := range checkTerraform(m, "../terraform") {
					t.Error(p)
				}
			}
			t.Logf("%d objects: %s", len(m.objects), strings.Join(m.objectList(), ", "))
		})
	}
}

// TestChecksCatchMistakes feeds the same checks an overlay with one mistake of each kind and
// requires each to be reported: the checks above are not vacuous.
func TestChecksCatchMistakes(t *testing.T) {
	fs := filesys.MakeFsInMemory()
	write := func(name, body string) {
		if err := fs.WriteFile(name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	write("/bad/kustomization.yaml", `
namespace: cohort
resources: [all.yaml]
images: [{name: cohort, newName: registry.example/cohort, newTag: latest}]
`)
	write("/bad/all.yaml", `
apiVersion: v1
kind: Namespace
metadata: {name: cohort, labels: {pod-security.kubernetes.io/enforce: baseline}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cohort-api}
spec:
  replicas: 2
  selector: {matchLabels: {app.kubernetes.io/name: cohort-api}}
  template:
    metadata: {labels: {app.kubernetes.io/name: cohort-api}}
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
        - name: api
          image: cohort
          args: [serve]
          ports: [{name: http, containerPort: 8080}]
          env:
            - name: DATABASE_URL
              valueFrom: {secretKeyRef: {name: missing-secret, key: url}}
            - {name: TEMPORAL_API_KEY_FILE, value: /secrets/temporal-api-key}
            - {name: COHORT_SHUTDOWN_TIMEOUT, value: 40s}
          volumeMounts: [{name: secrets, mountPath: /secrets}]
          securityContext: {allowPrivilegeEscalation: false}
      volumes:
        - name: secrets
          csi: {driver: secrets-store-gke.csi.k8s.io, volumeAttributes: {secretProviderClass: cohort}}
---
apiVersion: secrets-store.csi.x-k8s.io/v1
kind: SecretProviderClass
metadata: {name: cohort}
spec:
  provider: gke
  parameters:
    secrets: |
      - resourceName: projects/p/secrets/cohort-database-url/versions/latest
        path: database-url
---
apiVersion: v1
kind: Service
metadata: {name: cohort-api}
spec:
  selector: {app.kubernetes.io/name: cohort-apii}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: cohort-api}
spec:
  minAvailable: 2
  selector: {matchLabels: {app.kubernetes.io/name: cohort-api}}
`)
	m, err := render(fs, "/bad")
	if err != nil {
		t.Fatal(err)
	}
	problems := strings.Join(check(m, overlay{dir: "/bad", production: true}), "\n")
	for _, want := range []string{
		"enforce",                                  // namespace not restricted
		"api: no livenessProbe",                    // probes
		"api: no readinessProbe",                   // probes
		"api: resources.requests.cpu",              // resources
		"api: runAsUser",                           // numeric user
		"api: capabilities.drop",                   // capabilities
		"api: seccompProfile",                      // seccomp
		"api: readOnlyRootFilesystem",              // read-only root
		"api: no emptyDir mounted at /tmp",         // writable /tmp
		"api: no GOMEMLIMIT",                       // the runtime's memory limit
		`image "registry.example/cohort:latest"`,   // :latest
		`Secret "missing-secret"`,                  // undefined secret
		`Service cohort-api: selector`,             // selector selects nothing
		"PodDisruptionBudget cohort-api: minAvail", // PDB blocks every drain
		"no init container \"migrate\"",            // migrations before new pods
		"no NetworkPolicy",                         // default deny
		`does not provide "temporal-api-key"`,      // a *_FILE the secret store does not mount
		"no PodMonitoring scrapes it",              // metrics
		"iam.gke.io/gcp-service-account",           // Workload Identity
		"no cloud-sql-proxy sidecar",               // Cloud SQL
		"num_undelivered_messages",                 // backlog autoscaling
		"no Gateway",                               // public entry
		"api: graceful stop does not fit",          // drain longer than the grace period
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("the checks missed %q; they reported:\n%s", want, problems)
		}
	}

	// Strict decoding: a misspelt field is an error, not a silently dropped setting.
	write("/typo/kustomization.yaml", "resources: [d.yaml]\n")
	write("/typo/d.yaml", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  replica: 2
  selector: {matchLabels: {a: b}}
  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: x, image: x:1}]}}
`)
	if _, err := render(fs, "/typo"); err == nil || !strings.Contains(err.Error(), "replica") {
		t.Errorf("strict decoding accepted an unknown field: %v", err)
	}
}

// ---- rendering and decoding ----

type object struct {
	apiVersion, kind, name, namespace string
	typed                             any                        // a k8s.io/api type
	u                                 *unstructured.Unstructured // custom resources
}

func (o object) id() string { return o.kind + " " + o.name }

type manifests struct {
	objects      []object
	namespaces   []*corev1.Namespace
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	pdbs         []*policyv1.PodDisruptionBudget
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	netpols      []*networkingv1.NetworkPolicy
	secrets      map[string]*corev1.Secret
	configMaps   map[string]*corev1.ConfigMap
	accounts     map[string]*corev1.ServiceAccount
	pvcs         map[string]bool
	custom       map[string][]*unstructured.Unstructured // by kind
}

func (m *manifests) objectList() []string {
	var out []string
	for _, o := range m.objects {
		out = append(out, o.kind+"/"+o.name)
	}
	return out
}

// workload is a pod template with the object that owns it.
type workload struct {
	id       string
	name     string
	selector *metav1.LabelSelector
	labels   map[string]string
	replicas int32
	spec     *corev1.PodSpec
	claims   []string // a StatefulSet's volumeClaimTemplates: volumes its pods also have
}

func (m *manifests) workloads() []workload {
	var out []workload
	for _, d := range m.deployments {
		r := int32(1)
		if d.Spec.Replicas != nil {
			r = *d.Spec.Replicas
		}
		out = append(out, workload{"Deployment " + d.Name, d.Name, d.Spec.Selector, d.Spec.Template.Labels, r, &d.Spec.Template.Spec, nil})
	}
	for _, s := range m.statefulSets {
		r := int32(1)
		if s.Spec.Replicas != nil {
			r = *s.Spec.Replicas
		}
		var claims []string
		for _, c := range s.Spec.VolumeClaimTemplates {
			claims = append(claims, c.Name)
		}
		out = append(out, workload{"StatefulSet " + s.Name, s.Name, s.Spec.Selector, s.Spec.Template.Labels, r, &s.Spec.Template.Spec, claims})
	}
	return out
}

// typedKinds are decoded strictly into these k8s.io/api types (apiVersion must match too).
var typedKinds = map[string]struct {
	apiVersion string
	new        func() any
}{
	"Namespace":               {"v1", func() any { return &corev1.Namespace{} }},
	"ServiceAccount":          {"v1", func() any { return &corev1.ServiceAccount{} }},
	"ConfigMap":               {"v1", func() any { return &corev1.ConfigMap{} }},
	"Secret":                  {"v1", func() any { return &corev1.Secret{} }},
	"Service":                 {"v1", func() any { return &corev1.Service{} }},
	"PersistentVolumeClaim":   {"v1", func() any { return &corev1.PersistentVolumeClaim{} }},
	"Deployment":              {"apps/v1", func() any { return &appsv1.Deployment{} }},
	"StatefulSet":             {"apps/v1", func() any { return &appsv1.StatefulSet{} }},
	"PodDisruptionBudget":     {"policy/v1", func() any { return &policyv1.PodDisruptionBudget{} }},
	"HorizontalPodAutoscaler": {"autoscaling/v2", func() any { return &autoscalingv2.HorizontalPodAutoscaler{} }},
	"NetworkPolicy":           {"networking.k8s.io/v1", func() any { return &networkingv1.NetworkPolicy{} }},
}

// customKinds have no Go types in go.mod: decoded into unstructured, checked by hand below.
var customKinds = map[string]string{
	"Gateway":             "gateway.networking.k8s.io/v1",
	"HTTPRoute":           "gateway.networking.k8s.io/v1",
	"HealthCheckPolicy":   "networking.gke.io/v1",
	"GCPBackendPolicy":    "networking.gke.io/v1",
	"PodMonitoring":       "monitoring.googleapis.com/v1",
	"SecretProviderClass": "secrets-store.csi.x-k8s.io/v1",
}

// render runs kustomize on dir and decodes every object; any decoding problem is an error.
func render(fs filesys.FileSystem, dir string) (*manifests, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	m := &manifests{
		secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{},
		accounts: map[string]*corev1.ServiceAccount{}, pvcs: map[string]bool{},
		custom: map[string][]*unstructured.Unstructured{},
	}
	var errs []string
	for _, r := range rm.Resources() {
		raw, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(raw, &head); err != nil {
			return nil, err
		}
		o := object{apiVersion: head.APIVersion, kind: head.Kind, name: head.Metadata.Name, namespace: head.Metadata.Namespace}
		if tk, ok := typedKinds[o.kind]; ok {
			if o.apiVersion != tk.apiVersion {
				errs = append(errs, fmt.Sprintf("%s: apiVersion %s, want %s", o.id(), o.apiVersion, tk.apiVersion))
				continue
			}
			v := tk.new()
			if err := yaml.UnmarshalStrict(raw, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s: strict decode: %v", o.id(), err))
				continue
			}
			o.typed = v
			switch v := v.(type) {
			case *corev1.Namespace:
				m.namespaces = append(m.namespaces, v)
			case *corev1.ServiceAccount:
				m.accounts[v.Name] = v
			case *corev1.ConfigMap:
				m.configMaps[v.Name] = v
			case *corev1.Secret:
				m.secrets[v.Name] = v
			case *corev1.Service:
				m.services = append(m.services, v)
			case *corev1.PersistentVolumeClaim:
				m.pvcs[v.Name] = true
			case *appsv1.Deployment:
				m.deployments = append(m.deployments, v)
			case *appsv1.StatefulSet:
				m.statefulSets = append(m.statefulSets, v)
			case *policyv1.PodDisruptionBudget:
				m.pdbs = append(m.pdbs, v)
			case *autoscalingv2.HorizontalPodAutoscaler:
				m.hpas = append(m.hpas, v)
			case *networkingv1.NetworkPolicy:
				m.netpols = append(m.netpols, v)
			}
		} else if av, ok := customKinds[o.kind]; ok {
			if o.apiVersion != av {
				errs = append(errs, fmt.Sprintf("%s: apiVersion %s, want %s", o.id(), o.apiVersion, av))
				continue
			}
			var obj map[string]any
			if err := yaml.Unmarshal(raw, &obj); err != nil {
				return nil, err
			}
			o.u = &unstructured.Unstructured{Object: obj}
			m.custom[o.kind] = append(m.custom[o.kind], o.u)
		} else {
			errs = append(errs, fmt.Sprintf("%s (%s): no decoder; add it to typedKinds or customKinds with its checks", o.id(), o.apiVersion))
			continue
		}
		m.objects = append(m.objects, o)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("decode %s:\n%s", dir, strings.Join(errs, "\n"))
	}
	return m, nil
}

// ---- checks ----

func check(m *manifests, o overlay) []string {
	var p []string
	p = append(p, checkNamespace(m)...)
	p = append(p, checkPods(m)...)
	p = append(p, checkImages(m, o.production)...)
	p = append(p, checkSecretsAndConfig(m)...)
	p = append(p, checkSelectors(m)...)
	p = append(p, checkMigrations(m, o.production)...)
	p = append(p, checkNetworkPolicy(m)...)
	p = append(p, checkCustom(m)...)
	p = append(p, checkGracefulStop(m)...)
	if o.production {
		p = append(p, checkProduction(m)...)
	}
	return p
}

// Defaults of the settings a graceful stop takes (internal/config), and what the rest of a stop
// needs after them (the event loader, closing the clients, flushing traces).
const (
	defaultShutdownTimeout   = 8 * time.Second
	defaultWorkerStopTimeout = 50 * time.Second
	stopMargin               = 5 * time.Second
)

// setting is a container's value of an environment variable: its env, else the ConfigMaps of
// its envFrom, else def.
func (m *manifests) setting(c corev1.Container, name string, def time.Duration) (time.Duration, error) {
	v, found := "", false
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			v, found = e.Value, true
		}
	}
	for _, from := range c.EnvFrom {
		if found || from.ConfigMapRef == nil {
			continue
		}
		if cm := m.configMaps[from.ConfigMapRef.Name]; cm != nil {
			v, found = cm.Data[name]
		}
	}
	if !found {
		return def, nil
	}
	return time.ParseDuration(v)
}

// checkGracefulStop: a Cohort pod's grace period holds its whole stop, so Kubernetes never
// SIGKILLs work the process would have finished or handed back: the worker's stop timeout
// (running activities finish), serve's preStop sleep and drain, each plus a margin.
func checkGracefulStop(m *manifests) []string {
	var p []string
	for _, w := range m.workloads() {
		grace := 30 * time.Second
		if w.spec.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*w.spec.TerminationGracePeriodSeconds) * time.Second
		}
		for _, c := range w.spec.Containers {
			if !isCohort(c.Image) || len(c.Args) == 0 {
				continue
			}
			var need time.Duration
			var what string
			switch c.Args[0] {
			case "worker":
				d, err := m.setting(c, "COHORT_WORKER_STOP_TIMEOUT", defaultWorkerStopTimeout)
				if err != nil {
					p = append(p, fmt.Sprintf("%s: %s: COHORT_WORKER_STOP_TIMEOUT: %v", w.id, c.Name, err))
					continue
				}
				need, what = d, "COHORT_WORKER_STOP_TIMEOUT "+d.String()
			case "serve":
				d, err := m.setting(c, "COHORT_SHUTDOWN_TIMEOUT", defaultShutdownTimeout)
				if err != nil {
					p = append(p, fmt.Sprintf("%s: %s: COHORT_SHUTDOWN_TIMEOUT: %v", w.id, c.Name, err))
					continue
				}
				need, what = d, "COHORT_SHUTDOWN_TIMEOUT "+d.String()
				if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
					sleep := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
					need += sleep
					what += " + preStop sleep " + sleep.String()
				}
			default:
				continue
			}
			if need+stopMargin > grace {
				p = append(p, fmt.Sprintf("%s: %s: graceful stop does not fit: %s + %s margin > terminationGracePeriodSeconds %s",
					w.id, c.Name, what, stopMargin, grace))
			}
		}
	}
	return p
}

func checkNamespace(m *manifests) []string {
	if len(m.namespaces) != 1 {
		return []string{fmt.Sprintf("want exactly one Namespace, got %d", len(m.namespaces))}
	}
	ns := m.namespaces[0]
	var p []string
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		p = append(p, fmt.Sprintf("Namespace %s: pod-security.kubernetes.io/enforce=%q, want restricted", ns.Name, got))
	}
	for _, o := range m.objects {
		if o.kind != "Namespace" && o.namespace != ns.Name {
			p = append(p, fmt.Sprintf("%s: namespace %q, want %q", o.id(), o.namespace, ns.Name))
		}
	}
	return p
}

// isCohort: a container running Cohort's own image (before or after kustomize's rewrite).
func isCohort(image string) bool {
	name, _, _ := splitImage(image)
	return name == cohortImage || strings.HasSuffix(name, "/"+cohortImage)
}

func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// checkPods: every container, init container and sidecar against the restricted profile, plus
// probes, resources and a writable /tmp.
func checkPods(m *manifests) []string {
	var p []string
	for _, w := range m.workloads() {
		ps := w.spec
		bad := func(format string, a ...any) { p = append(p, w.id+": "+fmt.Sprintf(format, a...)) }
		if ps.HostNetwork || ps.HostPID || ps.HostIPC {
			bad("host namespaces")
		}
		vols := map[string]corev1.Volume{}
		for _, c := range w.claims {
			vols[c] = corev1.Volume{Name: c}
		}
		for _, v := range ps.Volumes {
			vols[v.Name] = v
			if v.HostPath != nil {
				bad("volume %s: hostPath", v.Name)
			}
			if v.PersistentVolumeClaim != nil && !m.pvcs[v.PersistentVolumeClaim.ClaimName] {
				bad("volume %s: PersistentVolumeClaim %q is not defined", v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
		if sa := ps.ServiceAccountName; sa != "" && m.accounts[sa] == nil && sa != "default" {
			bad("serviceAccountName %q is not defined", sa)
		}
		psc := ps.SecurityContext
		if psc == nil {
			psc = &corev1.PodSecurityContext{}
		}
		type kinded struct {
			c    corev1.Container
			kind string // container | init | sidecar
		}
		var all []kinded
		for _, c := range ps.InitContainers {
			k := "init"
			if isSidecar(c) {
				k = "sidecar"
			}
			all = append(all, kinded{c, k})
		}
		for _, c := range ps.Containers {
			all = append(all, kinded{c, "container"})
		}
		for _, kc := range all {
			c := kc.c
			cb := func(format string, a ...any) { bad(c.Name+": "+format, a...) }
			switch kc.kind {
			case "container":
				if c.LivenessProbe == nil {
					cb("no livenessProbe")
				}
				if c.ReadinessProbe == nil {
					cb("no readinessProbe")
				}
			case "sidecar":
				if c.StartupProbe == nil {
					cb("no startupProbe (a sidecar must be up before the next init container)")
				}
				if c.LivenessProbe == nil {
					cb("no livenessProbe")
				}
			case "init":
				// Run-to-completion init containers may not have probes (the API refuses them).
				if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
					cb("probes on a run-to-completion init container")
				}
			}
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[res]; !ok {
					cb("resources.requests.%s missing", res)
				}
				if _, ok := c.Resources.Limits[res]; !ok {
					cb("resources.limits.%s missing", res)
				}
			}
			sc := c.SecurityContext
			if sc == nil {
				sc = &corev1.SecurityContext{}
			}
			uid := psc.RunAsUser
			if sc.RunAsUser != nil {
				uid = sc.RunAsUser
			}
			switch {
			case uid == nil:
				cb("runAsUser not set (a numeric user is required for runAsNonRoot to be verifiable)")
			case *uid == 0:
				cb("runAsUser 0")
			case isCohort(c.Image) && *uid != cohortUID:
				cb("runAsUser %d, want %d (deploy/Dockerfile's user)", *uid, cohortUID)
			}
			nonRoot := psc.RunAsNonRoot
			if sc.RunAsNonRoot != nil {
				nonRoot = sc.RunAsNonRoot
			}
			if nonRoot == nil || !*nonRoot {
				cb("runAsNonRoot is not true")
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				cb("allowPrivilegeEscalation is not false")
			}
			if sc.Privileged != nil && *sc.Privileged {
				cb("privileged")
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				cb("capabilities.drop does not contain ALL")
			} else if len(sc.Capabilities.Add) > 0 {
				cb("capabilities.add %v", sc.Capabilities.Add)
			}
			seccomp := psc.SeccompProfile
			if sc.SeccompProfile != nil {
				seccomp = sc.SeccompProfile
			}
			if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
				cb("seccompProfile is not RuntimeDefault")
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				cb("readOnlyRootFilesystem is not true")
			}
			tmp := false
			for _, vm := range c.VolumeMounts {
				v, ok := vols[vm.Name]
				if !ok {
					cb("volumeMount %s: no such volume", vm.Name)
					continue
				}
				if vm.MountPath == "/tmp" && v.EmptyDir != nil {
					tmp = true
				}
			}
			if isCohort(c.Image) && !tmp {
				cb("no emptyDir mounted at /tmp (the root filesystem is read-only)")
			}
			if isCohort(c.Image) && kc.kind == "container" && (slices.Contains(c.Args, "serve") || slices.Contains(c.Args, "worker")) {
				// The Go runtime's soft limit follows the container's (the search index's budget
				// defaults to half of it): without it a process's heap grows until the OOM kill.
				memLimit := false
				for _, e := range c.Env {
					if e.Name != "GOMEMLIMIT" || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil {
						continue
					}
					ref := e.ValueFrom.ResourceFieldRef
					memLimit = ref.Resource == "limits.memory" && (ref.ContainerName == "" || ref.ContainerName == c.Name) &&
						(ref.Divisor.IsZero() || ref.Divisor.Value() == 1)
				}
				if !memLimit {
					cb("no GOMEMLIMIT from its limits.memory (env valueFrom resourceFieldRef, divisor 1: GOMEMLIMIT reads bytes)")
				}
			}
		}
	}
	return p
}

// splitImage splits an image reference into name, tag and digest.
func splitImage(image string) (name, tag, digest string) {
	name = image
	if i := strings.Index(name, "@"); i >= 0 {
		name, digest = name[:i], name[i+1:]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func checkImages(m *manifests, production bool) []string {
	var p []string
	cohortRefs := map[string]bool{}
	for _, w := range m.workloads() {
		for _, c := range append(slices.Clone(w.spec.InitContainers), w.spec.Containers...) {
			name, tag, digest := splitImage(c.Image)
			switch {
			case digest != "" && !digestRE.MatchString(digest):
				p = append(p, fmt.Sprintf("%s: %s: image %q: malformed digest", w.id, c.Name, c.Image))
			case digest == "" && tag == "":
				p = append(p, fmt.Sprintf("%s: %s: image %q is untagged (means latest)", w.id, c.Name, c.Image))
			case digest == "" && tag == "latest":
				p = append(p, fmt.Sprintf("%s: %s: image %q uses :latest", w.id, c.Name, c.Image))
			}
			if isCohort(c.Image) {
				cohortRefs[c.Image] = true
				if production && !strings.Contains(name, "/") {
					p = append(p, fmt.Sprintf("%s: %s: image %q is not a registry path (kustomize images: not applied)", w.id, c.Name, c.Image))
				}
			}
		}
	}
	if len(cohortRefs) > 1 {
		p = append(p, fmt.Sprintf("Cohort containers run different images: %v", sortedKeys(cohortRefs)))
	}
	return p
}

// checkSecretsAndConfig: every Secret, SecretProviderClass and ConfigMap a pod refers to exists,
// and every *_FILE setting that points into a secret volume names a file that volume provides.
func checkSecretsAndConfig(m *manifests) []string {
	var p []string
	spcFiles := map[string]map[string]bool{}
	for _, u := range m.custom["SecretProviderClass"] {
		files := map[string]bool{}
		for _, s := range spcSecrets(u) {
			files[s.Path] = true
		}
		spcFiles[u.GetName()] = files
	}
	secretKeys := func(name string) map[string]bool {
		s := m.secrets[name]
		if s == nil {
			return nil
		}
		keys := map[string]bool{}
		for k := range s.Data {
			keys[k] = true
		}
		for k := range s.StringData {
			keys[k] = true
		}
		return keys
	}
	for _, w := range m.workloads() {
		bad := func(format string, a ...any) { p = append(p, w.id+": "+fmt.Sprintf(format, a...)) }
		// files each volume provides (nil: not a secret volume)
		provided := map[string]map[string]bool{}
		for _, v := range w.spec.Volumes {
			switch {
			case v.Secret != nil:
				keys := secretKeys(v.Secret.SecretName)
				if keys == nil {
					bad("volume %s: Secret %q is not defined", v.Name, v.Secret.SecretName)
					continue
				}
				files := map[string]bool{}
				if len(v.Secret.Items) == 0 {
					files = keys
				}
				for _, it := range v.Secret.Items {
					if !keys[it.Key] {
						bad("volume %s: Secret %q has no key %q", v.Name, v.Secret.SecretName, it.Key)
					}
					files[it.Path] = true
				}
				provided[v.Name] = files
			case v.CSI != nil:
				if !strings.HasPrefix(v.CSI.Driver, "secrets-store") {
					continue
				}
				spc := v.CSI.VolumeAttributes["secretProviderClass"]
				files, ok := spcFiles[spc]
				if !ok {
					bad("volume %s: SecretProviderClass %q is not defined", v.Name, spc)
					continue
				}
				provided[v.Name] = files
			case v.Projected != nil:
				for _, src := range v.Projected.Sources {
					if src.Secret != nil && secretKeys(src.Secret.Name) == nil {
						bad("volume %s: Secret %q is not defined", v.Name, src.Secret.Name)
					}
				}
			}
		}
		for _, ref := range w.spec.ImagePullSecrets {
			if m.secrets[ref.Name] == nil {
				bad("imagePullSecret %q is not defined", ref.Name)
			}
		}
		for _, c := range append(slices.Clone(w.spec.InitContainers), w.spec.Containers...) {
			for _, ef := range c.EnvFrom {
				if ef.SecretRef != nil && m.secrets[ef.SecretRef.Name] == nil {
					bad("%s: envFrom Secret %q is not defined", c.Name, ef.SecretRef.Name)
				}
				if ef.ConfigMapRef != nil && m.configMaps[ef.ConfigMapRef.Name] == nil {
					bad("%s: envFrom ConfigMap %q is not defined", c.Name, ef.ConfigMapRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					ref := e.ValueFrom.SecretKeyRef
					if keys := secretKeys(ref.Name); keys == nil {
						bad("%s: env %s: Secret %q is not defined", c.Name, e.Name, ref.Name)
					} else if !keys[ref.Key] {
						bad("%s: env %s: Secret %q has no key %q", c.Name, e.Name, ref.Name, ref.Key)
					}
				}
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && m.configMaps[e.ValueFrom.ConfigMapKeyRef.Name] == nil {
					bad("%s: env %s: ConfigMap %q is not defined", c.Name, e.Name, e.ValueFrom.ConfigMapKeyRef.Name)
				}
				if !strings.HasSuffix(e.Name, "_FILE") || e.Value == "" {
					continue
				}
				found := false
				for _, vm := range c.VolumeMounts {
					files, secretVol := provided[vm.Name]
					rel, err := filepath.Rel(vm.MountPath, e.Value)
					if err != nil || strings.HasPrefix(rel, "..") {
						continue
					}
					found = true
					if secretVol && !files[rel] {
						bad("%s: %s=%s: volume %s does not provide %q", c.Name, e.Name, e.Value, vm.Name, rel)
					}
				}
				if !found {
					bad("%s: %s=%s is not under any volume mount", c.Name, e.Name, e.Value)
				}
			}
		}
	}
	return p
}

type spcSecret struct {
	ResourceName string `json:"resourceName"`
	Path         string `json:"path"`
}

// spcSecrets parses a SecretProviderClass's spec.parameters.secrets (a YAML list in a string).
func spcSecrets(u *unstructured.Unstructured) []spcSecret {
	s, _, _ := unstructured.NestedString(u.Object, "spec", "parameters", "secrets")
	var out []spcSecret
	if err := yaml.UnmarshalStrict([]byte(s), &out); err != nil {
		return nil
	}
	return out
}

func selects(sel *metav1.LabelSelector, lbls map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return false
	}
	return s.Matches(labels.Set(lbls))
}

// checkSelectors: workloads select their own pods; Services, PDBs, HPAs and PodMonitorings each
// point at exactly one workload, and a Service's target ports exist on its pods.
func checkSelectors(m *manifests) []string {
	var p []string
	ws := m.workloads()
	byName := map[string]workload{}
	for _, w := range ws {
		byName[w.name] = w
		if !selects(w.selector, w.labels) {
			p = append(p, fmt.Sprintf("%s: selector %v does not match its pod template's labels %v", w.id, w.selector.MatchLabels, w.labels))
		}
	}
	selected := func(sel *metav1.LabelSelector) []workload {
		var out []workload
		for _, w := range ws {
			if selects(sel, w.labels) {
				out = append(out, w)
			}
		}
		return out
	}
	for _, s := range m.services {
		got := selected(&metav1.LabelSelector{MatchLabels: s.Spec.Selector})
		if len(got) != 1 {
			p = append(p, fmt.Sprintf("Service %s: selector %v selects %d workloads, want 1", s.Name, s.Spec.Selector, len(got)))
			continue
		}
		for _, sp := range s.Spec.Ports {
			if !hasPort(got[0].spec, sp.TargetPort) {
				p = append(p, fmt.Sprintf("Service %s: targetPort %s is not a port of %s", s.Name, sp.TargetPort.String(), got[0].id))
			}
		}
	}
	minReplicas := map[string]int32{}
	for _, w := range ws {
		minReplicas[w.name] = w.replicas
	}
	for _, h := range m.hpas {
		w, ok := byName[h.Spec.ScaleTargetRef.Name]
		if !ok || h.Spec.ScaleTargetRef.Kind != "Deployment" && h.Spec.ScaleTargetRef.Kind != "StatefulSet" {
			p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: scaleTargetRef %s/%s does not exist", h.Name, h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name))
			continue
		}
		lo := int32(1)
		if h.Spec.MinReplicas != nil {
			lo = *h.Spec.MinReplicas
		}
		if lo > h.Spec.MaxReplicas {
			p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: minReplicas %d > maxReplicas %d", h.Name, lo, h.Spec.MaxReplicas))
		}
		if len(h.Spec.Metrics) == 0 {
			p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: no metrics", h.Name))
		}
		minReplicas[w.name] = lo
	}
	for _, d := range m.pdbs {
		got := selected(d.Spec.Selector)
		if len(got) != 1 {
			p = append(p, fmt.Sprintf("PodDisruptionBudget %s: selector selects %d workloads, want 1", d.Name, len(got)))
			continue
		}
		if !selectorsEqual(d.Spec.Selector, got[0].selector) {
			p = append(p, fmt.Sprintf("PodDisruptionBudget %s: selector %v differs from %s's %v", d.Name, d.Spec.Selector.MatchLabels, got[0].id, got[0].selector.MatchLabels))
		}
		if (d.Spec.MinAvailable == nil) == (d.Spec.MaxUnavailable == nil) {
			p = append(p, fmt.Sprintf("PodDisruptionBudget %s: set exactly one of minAvailable and maxUnavailable", d.Name))
		}
		if ma := d.Spec.MinAvailable; ma != nil && ma.Type == intstr.Int && ma.IntVal >= minReplicas[got[0].name] {
			p = append(p, fmt.Sprintf("PodDisruptionBudget %s: minAvailable %d with as few as %d replicas blocks every node drain", d.Name, ma.IntVal, minReplicas[got[0].name]))
		}
	}
	// Every Cohort Deployment has a PDB and an HPA.
	for _, dep := range m.deployments {
		if !isCohort(dep.Spec.Template.Spec.Containers[0].Image) {
			continue
		}
		hasPDB, hasHPA := false, false
		for _, d := range m.pdbs {
			hasPDB = hasPDB || selects(d.Spec.Selector, dep.Spec.Template.Labels)
		}
		for _, h := range m.hpas {
			hasHPA = hasHPA || h.Spec.ScaleTargetRef.Name == dep.Name
		}
		if !hasPDB {
			p = append(p, fmt.Sprintf("Deployment %s: no PodDisruptionBudget", dep.Name))
		}
		if !hasHPA {
			p = append(p, fmt.Sprintf("Deployment %s: no HorizontalPodAutoscaler", dep.Name))
		}
	}
	return p
}

func selectorsEqual(a, b *metav1.LabelSelector) bool {
	sa, err1 := metav1.LabelSelectorAsSelector(a)
	sb, err2 := metav1.LabelSelectorAsSelector(b)
	return err1 == nil && err2 == nil && sa.String() == sb.String()
}

func hasPort(ps *corev1.PodSpec, port intstr.IntOrString) bool {
	for _, c := range append(slices.Clone(ps.InitContainers), ps.Containers...) {
		for _, cp := range c.Ports {
			if (port.Type == intstr.String && cp.Name == port.StrVal) || (port.Type == intstr.Int && cp.ContainerPort == port.IntVal) {
				return true
			}
		}
	}
	return false
}

// checkMigrations: each Cohort serve/worker pod runs `cohort migrate` as an init container of the
// same image before its main container starts, after the database proxy sidecar if there is one.
func checkMigrations(m *manifests, production bool) []string {
	var p []string
	for _, w := range m.workloads() {
		main := w.spec.Containers[0]
		if !isCohort(main.Image) {
			continue
		}
		migrate, proxy := -1, -1
		for i, c := range w.spec.InitContainers {
			if c.Name == "migrate" {
				migrate = i
				if !slices.Equal(c.Args, []string{"migrate"}) || c.Image != main.Image {
					p = append(p, fmt.Sprintf("%s: init container migrate must run %q with the main container's image", w.id, "migrate"))
				}
			}
			if c.Name == "cloud-sql-proxy" && isSidecar(c) {
				proxy = i
			}
		}
		if migrate < 0 {
			p = append(p, fmt.Sprintf("%s: no init container \"migrate\" (migrations must run before the new pods)", w.id))
		}
		if production && proxy < 0 {
			p = append(p, fmt.Sprintf("%s: no cloud-sql-proxy sidecar (init container with restartPolicy Always)", w.id))
		}
		if proxy >= 0 && migrate >= 0 && proxy > migrate {
			p = append(p, fmt.Sprintf("%s: cloud-sql-proxy starts after migrate", w.id))
		}
	}
	return p
}

// checkNetworkPolicy: a default deny for the namespace (ingress and egress), and every port a
// Service exposes is let in by some policy.
func checkNetworkPolicy(m *manifests) []string {
	deny := false
	for _, np := range m.netpols {
		sel := np.Spec.PodSelector
		if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 &&
			slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) &&
			slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) &&
			len(np.Spec.Ingress) == 0 && len(np.Spec.Egress) == 0 {
			deny = true
		}
	}
	if !deny {
		return []string{"no NetworkPolicy denying all ingress and egress by default"}
	}
	return nil
}

// checkCustom: the custom resources, field by field, and what they refer to.
func checkCustom(m *manifests) []string {
	var p []string
	str := func(u *unstructured.Unstructured, fields ...string) string {
		s, _, _ := unstructured.NestedString(u.Object, fields...)
		return s
	}
	slice := func(u *unstructured.Unstructured, fields ...string) []any {
		s, _, _ := unstructured.NestedSlice(u.Object, fields...)
		return s
	}
	service := func(name string) *corev1.Service {
		for _, s := range m.services {
			if s.Name == name {
				return s
			}
		}
		return nil
	}
	listeners := map[string]map[string]bool{} // gateway -> listener names
	for _, g := range m.custom["Gateway"] {
		id := "Gateway " + g.GetName()
		if str(g, "spec", "gatewayClassName") == "" {
			p = append(p, id+": no spec.gatewayClassName")
		}
		names := map[string]bool{}
		for _, l := range slice(g, "spec", "listeners") {
			lm, _ := l.(map[string]any)
			name, _ := lm["name"].(string)
			proto, _ := lm["protocol"].(string)
			port := number(lm["port"])
			if name == "" || proto == "" || port == 0 {
				p = append(p, fmt.Sprintf("%s: listener %v needs name, protocol and port", id, lm))
			}
			if _, tls := lm["tls"]; proto == "HTTPS" && !tls && g.GetAnnotations()["networking.gke.io/certmap"] == "" {
				p = append(p, id+": HTTPS listener without tls and without a networking.gke.io/certmap certificate map")
			}
			names[name] = true
		}
		if len(names) == 0 {
			p = append(p, id+": no listeners")
		}
		listeners[g.GetName()] = names
	}
	for _, r := range m.custom["HTTPRoute"] {
		id := "HTTPRoute " + r.GetName()
		parents := slice(r, "spec", "parentRefs")
		if len(parents) == 0 {
			p = append(p, id+": no parentRefs")
		}
		for _, pr := range parents {
			pm, _ := pr.(map[string]any)
			gw, _ := pm["name"].(string)
			section, _ := pm["sectionName"].(string)
			ls, ok := listeners[gw]
			if !ok {
				p = append(p, fmt.Sprintf("%s: parent Gateway %q is not defined", id, gw))
			} else if section != "" && !ls[section] {
				p = append(p, fmt.Sprintf("%s: Gateway %s has no listener %q", id, gw, section))
			}
		}
		rules := slice(r, "spec", "rules")
		if len(rules) == 0 {
			p = append(p, id+": no rules")
		}
		for _, rule := range rules {
			rm, _ := rule.(map[string]any)
			refs, _ := rm["backendRefs"].([]any)
			filters, _ := rm["filters"].([]any)
			if len(refs) == 0 && len(filters) == 0 {
				p = append(p, id+": a rule with neither backendRefs nor filters")
			}
			for _, ref := range refs {
				bm, _ := ref.(map[string]any)
				name, _ := bm["name"].(string)
				port := number(bm["port"])
				s := service(name)
				if s == nil {
					p = append(p, fmt.Sprintf("%s: backend Service %q is not defined", id, name))
					continue
				}
				if !slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return int64(sp.Port) == port }) {
					p = append(p, fmt.Sprintf("%s: Service %s has no port %d", id, name, port))
				}
			}
		}
	}
	for _, kind := range []string{"HealthCheckPolicy", "GCPBackendPolicy"} {
		for _, u := range m.custom[kind] {
			id := kind + " " + u.GetName()
			if str(u, "spec", "targetRef", "kind") != "Service" || service(str(u, "spec", "targetRef", "name")) == nil {
				p = append(p, id+": spec.targetRef must name a Service of the overlay")
			}
			if d, _, _ := unstructured.NestedMap(u.Object, "spec", "default"); len(d) == 0 {
				p = append(p, id+": no spec.default")
			}
		}
	}
	for _, u := range m.custom["PodMonitoring"] {
		id := "PodMonitoring " + u.GetName()
		ml, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		var got []workload
		for _, w := range m.workloads() {
			if selects(&metav1.LabelSelector{MatchLabels: ml}, w.labels) {
				got = append(got, w)
			}
		}
		if len(got) != 1 {
			p = append(p, fmt.Sprintf("%s: selector %v selects %d workloads, want 1", id, ml, len(got)))
			continue
		}
		eps := slice(u, "spec", "endpoints")
		if len(eps) == 0 {
			p = append(p, id+": no endpoints")
		}
		for _, ep := range eps {
			em, _ := ep.(map[string]any)
			port, _ := em["port"].(string)
			if port == "" || !hasPort(got[0].spec, intstr.FromString(port)) {
				p = append(p, fmt.Sprintf("%s: endpoint port %q is not a named port of %s", id, port, got[0].id))
			}
			if port == "http" {
				p = append(p, id+": metrics scraped from the public HTTP port; use the separate metrics port")
			}
		}
	}
	resourceRE := regexp.MustCompile(`^projects/[^/]+/secrets/[^/]+/versions/[^/]+$`)
	for _, u := range m.custom["SecretProviderClass"] {
		id := "SecretProviderClass " + u.GetName()
		if str(u, "spec", "provider") == "" {
			p = append(p, id+": no spec.provider")
		}
		secrets := spcSecrets(u)
		if len(secrets) == 0 {
			p = append(p, id+": spec.parameters.secrets is empty or not a list of {resourceName, path}")
		}
		for _, s := range secrets {
			if !resourceRE.MatchString(s.ResourceName) || s.Path == "" || strings.Contains(s.Path, "/") {
				p = append(p, fmt.Sprintf("%s: bad entry %+v", id, s))
			}
		}
	}
	return p
}

// checkProduction: what the gke overlay must have beyond the common rules.
func checkProduction(m *manifests) []string {
	var p []string
	for _, kind := range []string{"Gateway", "HTTPRoute", "PodMonitoring", "SecretProviderClass", "HealthCheckPolicy"} {
		if len(m.custom[kind]) == 0 {
			p = append(p, "no "+kind)
		}
	}
	saRE := regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]@[-a-zA-Z0-9_]+\.iam\.gserviceaccount\.com$`)
	for _, w := range m.workloads() {
		if !isCohort(w.spec.Containers[0].Image) {
			continue
		}
		sa := m.accounts[w.spec.ServiceAccountName]
		if sa == nil || !saRE.MatchString(sa.Annotations["iam.gke.io/gcp-service-account"]) {
			p = append(p, fmt.Sprintf("%s: its ServiceAccount has no Workload Identity annotation iam.gke.io/gcp-service-account", w.id))
		}
		monitored := false
		for _, u := range m.custom["PodMonitoring"] {
			ml, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
			monitored = monitored || selects(&metav1.LabelSelector{MatchLabels: ml}, w.labels)
		}
		if !monitored {
			p = append(p, w.id+": no PodMonitoring scrapes it")
		}
		for _, v := range w.spec.Volumes {
			if v.Secret != nil {
				p = append(p, fmt.Sprintf("%s: volume %s is a Kubernetes Secret; production secrets come from Secret Manager", w.id, v.Name))
			}
		}
	}
	// The worker scales on the Pub/Sub backlog of the subscription it reads.
	var sub string
	if cm := m.configMaps["cohort"]; cm != nil {
		sub = cm.Data["PUBSUB_SUBSCRIPTION"]
	}
	found := false
	for _, h := range m.hpas {
		for _, mt := range h.Spec.Metrics {
			if mt.Type == autoscalingv2.ExternalMetricSourceType && mt.External != nil &&
				mt.External.Metric.Name == "pubsub.googleapis.com|subscription|num_undelivered_messages" {
				found = true
				if h.Spec.ScaleTargetRef.Name != "cohort-worker" {
					p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: the Pub/Sub backlog metric scales %s, want cohort-worker", h.Name, h.Spec.ScaleTargetRef.Name))
				}
				sel := mt.External.Metric.Selector
				if sub == "" || sel == nil || sel.MatchLabels["resource.labels.subscription_id"] != sub {
					p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: backlog metric selector %v does not name PUBSUB_SUBSCRIPTION %q", h.Name, sel, sub))
				}
				if mt.External.Target.Type != autoscalingv2.AverageValueMetricType || mt.External.Target.AverageValue == nil {
					p = append(p, fmt.Sprintf("HorizontalPodAutoscaler %s: backlog target must be an AverageValue per pod", h.Name))
				}
			}
		}
	}
	if !found {
		p = append(p, "no HorizontalPodAutoscaler scales on pubsub.googleapis.com|subscription|num_undelivered_messages")
	}
	return p
}

// checkTerraform: the names the gke overlay refers to are the ones deploy/terraform creates.
func checkTerraform(m *manifests, dir string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(files) == 0 {
		return []string{fmt.Sprintf("no Terraform in %s", dir)}
	}
	var tf strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return []string{err.Error()}
		}
		tf.Write(b)
	}
	src := tf.String()
	var p []string
	want := func(what, value string) {
		if value == "" || !strings.Contains(src, `"`+value+`"`) {
			p = append(p, fmt.Sprintf("%s %q is not in %s/*.tf", what, value, dir))
		}
	}
	var cm map[string]string
	if c := m.configMaps["cohort"]; c != nil {
		cm = c.Data
	}
	want("PUBSUB_TOPIC", cm["PUBSUB_TOPIC"])
	want("PUBSUB_SUBSCRIPTION", cm["PUBSUB_SUBSCRIPTION"])
	want("BIGQUERY_DATASET", cm["BIGQUERY_DATASET"])
	for _, u := range m.custom["SecretProviderClass"] {
		for _, s := range spcSecrets(u) {
			want("Secret Manager secret", strings.Split(s.ResourceName, "/")[3])
		}
	}
	for _, g := range m.custom["Gateway"] {
		want("certificate map", g.GetAnnotations()["networking.gke.io/certmap"])
		for _, a := range func() []any { s, _, _ := unstructured.NestedSlice(g.Object, "spec", "addresses"); return s }() {
			am, _ := a.(map[string]any)
			v, _ := am["value"].(string)
			want("Gateway address", v)
		}
	}
	for _, sa := range m.accounts {
		if gsa := sa.Annotations["iam.gke.io/gcp-service-account"]; gsa != "" {
			want("Google service account id", strings.Split(gsa, "@")[0])
			// The Workload Identity binding names the KSA through variables namespace and ksa_name.
			if !strings.Contains(src, ".svc.id.goog[${var.namespace}/${var.ksa_name}]") {
				p = append(p, fmt.Sprintf("no Workload Identity binding for ${var.namespace}/${var.ksa_name} in %s/*.tf", dir))
			}
			for v, want := range map[string]string{"namespace": sa.Namespace, "ksa_name": sa.Name} {
				re := regexp.MustCompile(`(?s)variable "` + v + `" \{[^}]*default\s*=\s*"([^"]*)"`)
				got := "(none)"
				if m := re.FindStringSubmatch(src); m != nil {
					got = m[1]
				}
				if got != want {
					p = append(p, fmt.Sprintf("Terraform variable %s's default is %q, want %q (the KSA of the pods)", v, got, want))
				}
			}
		}
	}
	return p
}

// number reads a YAML number decoded through JSON (float64) or YAML (int64).
func number(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return 0
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
