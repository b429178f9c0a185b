package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The npm credential variables are worker secrets; a path to a CA bundle
// is not, whatever its variable's name.
func TestWorkerSecretsNpmAuthAndPaths(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "ca-certificates.crt")
	if err := os.WriteFile(bundle, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"NPM_CONFIG_//registry.npmjs.org/:_authToken=npm_abcdefgh12345",
		"npm_config_//npm.example.com/:_auth=dXNlcjpwYXNzd29yZA==",
		"npm_config_//npm.example.com/:_password=cGFzc3dvcmQx",
		"AWS_CA_BUNDLE=" + bundle,
		"AWS_SECRET_ACCESS_KEY=/3kQ+aZ9b/c8dEfGh==",
		"NODE_EXTRA_CA_CERTS=" + bundle,
	}
	var names []string
	for _, s := range WorkerSecrets(env) {
		names = append(names, s.Name)
	}
	want := []string{"AWS_SECRET_ACCESS_KEY", "NPM_CONFIG_//registry.npmjs.org/:_authToken",
		"npm_config_//npm.example.com/:_auth", "npm_config_//npm.example.com/:_password"}
	if !slices.Equal(names, want) {
		t.Errorf("WorkerSecrets = %q, want %q", names, want)
	}
}
