// Command schemacheck decodes every object of the given Kubernetes
// manifests strictly into the API's own Go types (k8s.io/api): a field the
// API does not have (a typo, a field at the wrong level), a value of the
// wrong type or an unparsable quantity is an error, as the API server's
// strict field validation would report it. It needs no cluster and no
// network once its modules are in the module cache.
//
//	go run . ../base/gilf.yaml ../local-executor/privileged.yaml ../replicas/gilf.yaml
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// kinds are the objects deploy/kubernetes may hold, by apiVersion and kind.
var kinds = map[string]func() any{
	"v1 ConfigMap":                  func() any { return &corev1.ConfigMap{} },
	"v1 Service":                    func() any { return &corev1.Service{} },
	"apps/v1 StatefulSet":           func() any { return &appsv1.StatefulSet{} },
	"apps/v1 Deployment":            func() any { return &appsv1.Deployment{} },
	"policy/v1 PodDisruptionBudget": func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1 Ingress":  func() any { return &networkingv1.Ingress{} },
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func check(path string) (int, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for i, doc := range separator.Split(string(src), -1) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", path, i+1, err))
			continue
		}
		if head.APIVersion == "" && head.Kind == "" && len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
			continue // only comments
		}
		newObj, ok := kinds[head.APIVersion+" "+head.Kind]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: document %d: %s %s is not a kind this check knows", path, i+1, head.APIVersion, head.Kind))
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), newObj()); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s (document %d): %w", path, head.Kind, i+1, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func stripComments(b []byte) []byte {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAll(b, nil)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: schemacheck MANIFEST...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		n, err := check(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
			continue
		}
		fmt.Printf("%s: %d objects decode strictly\n", path, n)
	}
	if failed {
		os.Exit(1)
	}
}
