package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// k8sObject is the part of a Kubernetes object these tests read.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		// StatefulSet
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec k8sPodSpec `yaml:"spec"`
		} `yaml:"template"`
		// Service: selector is a plain map there.
		Ports []struct {
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
			Name       string `yaml:"name"`
		} `yaml:"ports"`
		// Ingress
		TLS []struct {
			Hosts      []string `yaml:"hosts"`
			SecretName string   `yaml:"secretName"`
		} `yaml:"tls"`
		Rules []struct {
			Host string `yaml:"host"`
			HTTP struct {
				Paths []struct {
					Path    string `yaml:"path"`
					Backend struct {
						Service struct {
							Name string `yaml:"name"`
							Port struct {
								Name string `yaml:"name"`
							} `yaml:"port"`
						} `yaml:"service"`
					} `yaml:"backend"`
				} `yaml:"paths"`
			} `yaml:"http"`
		} `yaml:"rules"`
	} `yaml:"spec"`
	raw map[string]any
}

type k8sPodSpec struct {
	SecurityContext k8sSecurityContext `yaml:"securityContext"`
	Containers      []k8sContainer     `yaml:"containers"`
}

type k8sSecurityContext struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	RunAsUser                *int  `yaml:"runAsUser"`
	Privileged               *bool `yaml:"privileged"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	Ports []struct {
		ContainerPort int    `yaml:"containerPort"`
		Name          string `yaml:"name"`
	} `yaml:"ports"`
	Env []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	SecurityContext k8sSecurityContext `yaml:"securityContext"`
	LivenessProbe   *k8sProbe          `yaml:"livenessProbe"`
	ReadinessProbe  *k8sProbe          `yaml:"readinessProbe"`
	Resources       struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

func parseK8s(t *testing.T, rel string) []k8sObject {
	t.Helper()
	src := readRepoFile(t, rel)
	var out []k8sObject
	dec := yaml.NewDecoder(strings.NewReader(src))
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		var o k8sObject
		if err := node.Decode(&o); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if err := node.Decode(&o.raw); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("%s: an object without apiVersion, kind or metadata.name: %+v", rel, o.raw)
		}
		out = append(out, o)
	}
	return out
}

func k8sFind(t *testing.T, objs []k8sObject, kind string) k8sObject {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind {
			return o
		}
	}
	t.Fatalf("no %s in deploy/kubernetes/base/gilf.yaml", kind)
	return k8sObject{}
}

// imageUID is the numeric uid deploy/Dockerfile's final stage runs as.
func imageUID(t *testing.T) int {
	t.Helper()
	user := ""
	for _, in := range finalStage(parseDockerfile(t, readRepoFile(t, "deploy/Dockerfile"))) {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	uid, err := strconv.Atoi(strings.Split(user, ":")[0])
	if err != nil {
		t.Fatalf("deploy/Dockerfile USER %q: %v", user, err)
	}
	return uid
}

// TestDeployKubernetesManifest checks the default profile as shipped: the
// VERSION image tag, non-root with nothing to escalate, liveness on
// /healthz and readiness on /readyz, Prometheus scrape annotations,
// resources, an Ingress with TLS for the webhook alone, and no secret
// values in the file.
func TestDeployKubernetesManifest(t *testing.T) {
	objs := parseK8s(t, "deploy/kubernetes/base/gilf.yaml")
	version := repoVersion(t)
	for _, o := range objs {
		if o.Kind == "Secret" {
			t.Errorf("deploy/kubernetes/base/gilf.yaml holds Secret %s: secrets are created by the operator (kubectl create secret), never shipped", o.Metadata.Name)
		}
	}

	sts := k8sFind(t, objs, "StatefulSet")
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Error("the StatefulSet must have exactly 1 replica: the SQLite store is not shared")
	}
	pod := sts.Spec.Template.Spec
	for k, v := range sts.Spec.Selector.MatchLabels {
		if sts.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod's labels", k, v)
		}
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if want := "ghcr.io/gilf-review/gilf:" + version; c.Image != want {
		t.Errorf("image %s, want %s (VERSION)", c.Image, want)
	}
	if !strings.Contains(readRepoFile(t, "docs/operating.md"), "ghcr.io/gilf-review/gilf:"+version) {
		t.Errorf("docs/operating.md does not name the image ghcr.io/gilf-review/gilf:%s", version)
	}

	isTrue := func(b *bool) bool { return b != nil && *b }
	isFalse := func(b *bool) bool { return b != nil && !*b }
	if !isTrue(pod.SecurityContext.RunAsNonRoot) || pod.SecurityContext.RunAsUser == nil || *pod.SecurityContext.RunAsUser != imageUID(t) {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and the image's uid %d", pod.SecurityContext, imageUID(t))
	}
	if pod.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("pod seccompProfile %q, want RuntimeDefault", pod.SecurityContext.SeccompProfile.Type)
	}
	sc := c.SecurityContext
	if !isFalse(sc.AllowPrivilegeEscalation) || !isTrue(sc.ReadOnlyRootFilesystem) || isTrue(sc.Privileged) ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container securityContext %+v: want allowPrivilegeEscalation false, readOnlyRootFilesystem, not privileged, drop ALL", sc)
	}

	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	probe := func(what string, p *k8sProbe, path string) {
		t.Helper()
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no %s probe (httpGet)", what)
			return
		}
		if p.HTTPGet.Path != path {
			t.Errorf("%s probe on %s, want %s", what, p.HTTPGet.Path, path)
		}
		if _, ok := ports[p.HTTPGet.Port]; !ok {
			t.Errorf("%s probe on port %q, which the container does not name", what, p.HTTPGet.Port)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")

	ann := sts.Spec.Template.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" || ann["prometheus.io/port"] != strconv.Itoa(ports["http"]) {
		t.Errorf("pod annotations %v: want prometheus.io/scrape true, path /metrics, port %d", ann, ports["http"])
	}
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" {
			t.Errorf("no resources.requests.%s", r)
		}
	}
	if c.Resources.Limits["memory"] == "" {
		t.Error("no resources.limits.memory")
	}

	// Every ConfigMap key is a setting gilf reads.
	settings := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"([A-Z][A-Z0-9_]+)"`).FindAllSubmatch(src, -1) {
			settings[string(m[1])] = true
		}
	}
	cm := k8sFind(t, objs, "ConfigMap")
	for k := range cm.Data {
		if !settings[k] {
			t.Errorf("ConfigMap key %s is no setting cmd/gilf reads", k)
		}
	}
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil && e.ConfigMapRef.Name != cm.Metadata.Name {
			t.Errorf("envFrom names ConfigMap %s, which the manifest does not define", e.ConfigMapRef.Name)
		}
	}

	svc := k8sFind(t, objs, "Service")
	if sel, _ := svc.raw["spec"].(map[string]any)["selector"].(map[string]any); len(sel) == 0 {
		t.Error("the Service selects nothing")
	} else {
		for k, v := range sel {
			if sts.Spec.Template.Metadata.Labels[k] != v {
				t.Errorf("Service selector %s=%v does not match the pod", k, v)
			}
		}
	}

	ing := k8sFind(t, objs, "Ingress")
	if ing.APIVersion != "networking.k8s.io/v1" {
		t.Errorf("Ingress apiVersion %s, want networking.k8s.io/v1", ing.APIVersion)
	}
	tlsHosts := map[string]bool{}
	for _, tls := range ing.Spec.TLS {
		if tls.SecretName == "" {
			t.Error("an Ingress tls entry without secretName")
		}
		for _, h := range tls.Hosts {
			tlsHosts[h] = true
		}
	}
	if len(ing.Spec.Rules) == 0 {
		t.Fatal("the Ingress has no rules")
	}
	for _, r := range ing.Spec.Rules {
		if !tlsHosts[r.Host] {
			t.Errorf("Ingress host %q is not covered by its tls", r.Host)
		}
		for _, p := range r.HTTP.Paths {
			if p.Path != "/webhook" {
				t.Errorf("the Ingress exposes %s: only /webhook is public", p.Path)
			}
			b := p.Backend.Service
			found := false
			for _, sp := range svc.Spec.Ports {
				found = found || (b.Name == svc.Metadata.Name && sp.Name == b.Port.Name)
			}
			if !found {
				t.Errorf("Ingress backend %s:%s is not a port of Service %s", b.Name, b.Port.Name, svc.Metadata.Name)
			}
		}
	}
}

// TestDeployKubernetesLocalExecutorProfile: the overlay that runs the local
// executor says what it needs (root, privileged, the opt-in) and builds on
// the default profile.
func TestDeployKubernetesLocalExecutorProfile(t *testing.T) {
	kust := readRepoFile(t, "deploy/kubernetes/local-executor/kustomization.yaml")
	var k struct {
		Resources []string `yaml:"resources"`
		Patches   []struct {
			Path string `yaml:"path"`
		} `yaml:"patches"`
	}
	if err := yaml.Unmarshal([]byte(kust), &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Resources) != 1 || k.Resources[0] != "../base" || len(k.Patches) != 1 {
		t.Fatalf("local-executor/kustomization.yaml: resources %v, patches %v: want ../base and one patch", k.Resources, k.Patches)
	}
	objs := parseK8s(t, filepath.ToSlash(filepath.Join("deploy/kubernetes/local-executor", k.Patches[0].Path)))
	if len(objs) != 1 || objs[0].Kind != "StatefulSet" || objs[0].Metadata.Name != k8sFind(t, parseK8s(t, "deploy/kubernetes/base/gilf.yaml"), "StatefulSet").Metadata.Name {
		t.Fatalf("the patch is not the base's StatefulSet: %+v", objs)
	}
	pod := objs[0].Spec.Template.Spec
	if len(pod.Containers) != 1 || pod.Containers[0].Name != "gilf" {
		t.Fatal("the patch does not name the gilf container")
	}
	c := pod.Containers[0]
	if pod.SecurityContext.RunAsUser == nil || *pod.SecurityContext.RunAsUser != 0 || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("the local-executor profile must run as root, privileged: %+v %+v", pod.SecurityContext, c.SecurityContext)
	}
	opted := false
	for _, e := range c.Env {
		opted = opted || (e.Name == "GILF_ALLOW_LOCAL_VALIDATION" && e.Value == "1")
	}
	if !opted {
		t.Error("the local-executor profile does not set GILF_ALLOW_LOCAL_VALIDATION=1")
	}
	if !bytes.Contains([]byte(kust), []byte("CAP_SYS_ADMIN")) {
		t.Error("local-executor/kustomization.yaml does not say why it is privileged")
	}
}

// k8sDig walks a decoded object by map keys; nil where a key is missing.
func k8sDig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// TestDeployKubernetesReplicasProfile: the replicas overlay runs gilf as
// several replicas over PostgreSQL. It builds on the base (whose SQLite
// StatefulSet it deletes), runs the base's pod as it is (image, user,
// securityContext, probes, envFrom), reads GILF_DATABASE_URL from a Secret
// key and ships no Secret, keeps only disposable state (emptyDir, no volume
// claim), stores evidence in S3, spreads replicas over nodes and keeps two
// through voluntary disruptions.
func TestDeployKubernetesReplicasProfile(t *testing.T) {
	kust := readRepoFile(t, "deploy/kubernetes/replicas/kustomization.yaml")
	var k struct {
		Resources []string `yaml:"resources"`
		Patches   []struct {
			Path  string `yaml:"path"`
			Patch string `yaml:"patch"`
		} `yaml:"patches"`
	}
	if err := yaml.Unmarshal([]byte(kust), &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Resources) != 2 || k.Resources[0] != "../base" || k.Resources[1] != "gilf.yaml" {
		t.Fatalf("replicas/kustomization.yaml: resources %v, want ../base and gilf.yaml", k.Resources)
	}
	base := parseK8s(t, "deploy/kubernetes/base/gilf.yaml")
	sts := k8sFind(t, base, "StatefulSet")
	deleted := false
	for _, p := range k.Patches {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(p.Patch), &o); err != nil {
			t.Fatalf("replicas/kustomization.yaml: patch %q: %v", p.Patch, err)
		}
		deleted = deleted || (o["$patch"] == "delete" && o["kind"] == "StatefulSet" && k8sDig(o, "metadata", "name") == sts.Metadata.Name)
	}
	if !deleted {
		t.Errorf("replicas/kustomization.yaml does not delete the base's StatefulSet %s (its SQLite volume is not shared)", sts.Metadata.Name)
	}

	objs := parseK8s(t, "deploy/kubernetes/replicas/gilf.yaml")
	for _, o := range objs {
		if o.Kind == "Secret" {
			t.Errorf("replicas/gilf.yaml holds Secret %s: secrets are created by the operator (kubectl create secret), never shipped", o.Metadata.Name)
		}
	}
	dep := k8sFind(t, objs, "Deployment")
	if dep.Metadata.Name != sts.Metadata.Name {
		t.Errorf("Deployment %s, want the base's name %s (its Service and Ingress select it)", dep.Metadata.Name, sts.Metadata.Name)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 3 {
		t.Fatalf("the Deployment has %v replicas, want at least 3", dep.Spec.Replicas)
	}
	if diff := cmp.Diff(sts.Spec.Template.Metadata, dep.Spec.Template.Metadata); diff != "" {
		t.Errorf("the replicas' pod labels and annotations differ from the base's (-base +replicas):\n%s", diff)
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod's labels", k, v)
		}
	}
	basePod := k8sDig(sts.raw, "spec", "template", "spec")
	pod := k8sDig(dep.raw, "spec", "template", "spec")
	for _, key := range []string{"securityContext", "automountServiceAccountToken", "terminationGracePeriodSeconds"} {
		if diff := cmp.Diff(k8sDig(basePod, key), k8sDig(pod, key)); diff != "" {
			t.Errorf("pod %s differs from the base's (-base +replicas):\n%s", key, diff)
		}
	}
	baseC := k8sDig(basePod, "containers").([]any)[0]
	cs, _ := k8sDig(pod, "containers").([]any)
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	c := cs[0]
	for _, key := range []string{"name", "image", "args", "ports", "envFrom", "securityContext", "startupProbe", "livenessProbe", "readinessProbe"} {
		if diff := cmp.Diff(k8sDig(baseC, key), k8sDig(c, key)); diff != "" {
			t.Errorf("container %s differs from the base's (-base +replicas):\n%s", key, diff)
		}
	}

	env := map[string]any{}
	envList, _ := k8sDig(c, "env").([]any)
	for _, e := range envList {
		env[k8sDig(e, "name").(string)] = e
	}
	if ref := k8sDig(env["GILF_DATABASE_URL"], "valueFrom", "secretKeyRef"); ref == nil || k8sDig(ref, "name") == "" || k8sDig(ref, "key") == "" {
		t.Errorf("GILF_DATABASE_URL is %v: want valueFrom.secretKeyRef with a name and a key", env["GILF_DATABASE_URL"])
	} else if !strings.Contains(kust, "kubectl create secret generic "+k8sDig(ref, "name").(string)) {
		t.Errorf("replicas/kustomization.yaml does not say how to create the secret %v", k8sDig(ref, "name"))
	}
	if v, _ := k8sDig(env["GILF_DATABASE_MAX_CONNS"], "value").(string); v == "" {
		t.Error("GILF_DATABASE_MAX_CONNS is not set: size each replica's pool for the database's max_connections")
	} else if n, err := strconv.Atoi(v); err != nil || n < 1 {
		t.Errorf("GILF_DATABASE_MAX_CONNS=%q is not a positive number", v)
	}
	cm := k8sFind(t, base, "ConfigMap")
	if cm.Data["GILF_EVIDENCE_S3_BUCKET"] == "" && k8sDig(env["GILF_EVIDENCE_FS_SHARED"], "value") != "1" {
		t.Error("no GILF_EVIDENCE_S3_BUCKET in the base's ConfigMap and no GILF_EVIDENCE_FS_SHARED=1: gilf refuses filesystem evidence with GILF_DATABASE_URL")
	}

	// Every volume is disposable: an emptyDir, the data directory's too.
	dataDir, _ := k8sDig(env["GILF_DATA_DIR"], "value").(string)
	volumes := map[string]any{}
	vs, _ := k8sDig(pod, "volumes").([]any)
	for _, v := range vs {
		volumes[k8sDig(v, "name").(string)] = v
		if k8sDig(v, "emptyDir") == nil {
			t.Errorf("volume %v is not an emptyDir: a replica keeps nothing durable", k8sDig(v, "name"))
		}
	}
	mounted := false
	mounts, _ := k8sDig(c, "volumeMounts").([]any)
	for _, m := range mounts {
		if k8sDig(m, "mountPath") == dataDir {
			mounted = volumes[k8sDig(m, "name").(string)] != nil
		}
	}
	if dataDir == "" || !mounted {
		t.Errorf("GILF_DATA_DIR %q is not on a volume of the pod (the root file system is read-only)", dataDir)
	}

	spread := false
	tscs, _ := k8sDig(pod, "topologySpreadConstraints").([]any)
	for _, tsc := range tscs {
		spread = spread || (k8sDig(tsc, "topologyKey") == "kubernetes.io/hostname" && k8sDig(tsc, "whenUnsatisfiable") == "DoNotSchedule")
	}
	if !spread {
		t.Error("no topologySpreadConstraints on kubernetes.io/hostname with DoNotSchedule: replicas may share a node")
	}

	pdb := k8sFind(t, objs, "PodDisruptionBudget")
	if pdb.APIVersion != "policy/v1" {
		t.Errorf("PodDisruptionBudget apiVersion %s, want policy/v1", pdb.APIVersion)
	}
	if n, ok := k8sDig(pdb.raw, "spec", "minAvailable").(int); !ok || n < 2 || n >= *dep.Spec.Replicas {
		t.Errorf("PodDisruptionBudget minAvailable %v: want at least 2 and fewer than the %d replicas", k8sDig(pdb.raw, "spec", "minAvailable"), *dep.Spec.Replicas)
	}
	sel, _ := k8sDig(pdb.raw, "spec", "selector", "matchLabels").(map[string]any)
	if len(sel) == 0 {
		t.Error("the PodDisruptionBudget selects nothing")
	}
	for k, v := range sel {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("PodDisruptionBudget selector %s=%v does not match the pod", k, v)
		}
	}
}
