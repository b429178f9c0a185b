package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gilf-review/gilf/executors/local/egress"
)

func TestLoadInstallCache(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	min, max := strconv.FormatInt(MinInstallCacheBytes, 10), strconv.FormatInt(MaxInstallCacheBytes, 10)
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, c InstallCacheConfig)
		wantErr []string
	}{
		{name: "defaults", check: func(t *testing.T, c InstallCacheConfig) {
			if !c.TerminateTLS || c.CacheBytes != 10<<30 || c.MetadataTTL != 5*time.Minute || c.TunnelHosts != nil || c.Credentials != nil || c.WarmBytes != 20<<30 {
				t.Errorf("%+v", c)
			}
		}},
		{name: "off", env: map[string]string{envInstallTLSTerminate: "0", envInstallCacheBytes: "0"}, check: func(t *testing.T, c InstallCacheConfig) {
			if c.TerminateTLS || c.CacheBytes != 0 {
				t.Errorf("%+v", c)
			}
		}},
		{name: "smallest cache", env: map[string]string{envInstallCacheBytes: min}, check: func(t *testing.T, c InstallCacheConfig) {
			if c.CacheBytes != MinInstallCacheBytes {
				t.Errorf("%+v", c)
			}
		}},
		{name: "largest cache", env: map[string]string{envInstallCacheBytes: max}, check: func(t *testing.T, c InstallCacheConfig) {
			if c.CacheBytes != MaxInstallCacheBytes {
				t.Errorf("%+v", c)
			}
		}},
		{name: "ttl, tunnels, credentials", env: map[string]string{
			envInstallCacheMetadataTTL: "60000", envInstallTunnelHosts: "github.com:443",
			envInstallRegistryCredsFile: "npm.corp.example=" + tok,
		}, check: func(t *testing.T, c InstallCacheConfig) {
			if c.MetadataTTL != time.Minute || len(c.TunnelHosts) != 1 || c.TunnelHosts[0].Host != "github.com" {
				t.Errorf("%+v", c)
			}
			if v := c.Credentials["npm.corp.example:443"]; v.Reveal() != "Bearer tok-123" {
				t.Errorf("credentials %q", v.Reveal())
			}
			if s := fmt.Sprintf("%v %+v", c, c); strings.Contains(s, "tok-123") {
				t.Errorf("the config prints the token: %s", s)
			}
		}},
		{name: "warm disks off", env: map[string]string{envInstallWarmBytes: "0"}, check: func(t *testing.T, c InstallCacheConfig) {
			if c.WarmBytes != 0 {
				t.Errorf("%+v", c)
			}
		}},
		{name: "smallest and largest warm bound", env: map[string]string{envInstallWarmBytes: strconv.FormatInt(MinInstallWarmBytes, 10)}, check: func(t *testing.T, c InstallCacheConfig) {
			if c.WarmBytes != MinInstallWarmBytes {
				t.Errorf("%+v", c)
			}
			if c, _ := loadInstallCache(envMap(map[string]string{envInstallWarmBytes: strconv.FormatInt(MaxInstallWarmBytes, 10)}), nil); c.WarmBytes != MaxInstallWarmBytes {
				t.Errorf("%+v", c)
			}
		}},
		{name: "below the smallest warm bound", env: map[string]string{envInstallWarmBytes: strconv.FormatInt(MinInstallWarmBytes-1, 10)}, wantErr: []string{envInstallWarmBytes}},
		{name: "over the largest warm bound", env: map[string]string{envInstallWarmBytes: strconv.FormatInt(MaxInstallWarmBytes+1, 10)}, wantErr: []string{envInstallWarmBytes}},
		{name: "below the smallest cache", env: map[string]string{envInstallCacheBytes: strconv.FormatInt(MinInstallCacheBytes-1, 10)}, wantErr: []string{envInstallCacheBytes}},
		{name: "over the largest cache", env: map[string]string{envInstallCacheBytes: strconv.FormatInt(MaxInstallCacheBytes+1, 10)}, wantErr: []string{envInstallCacheBytes}},
		{name: "every bad setting at once", env: map[string]string{
			envInstallTLSTerminate: "yes", envInstallCacheBytes: "lots", envInstallCacheMetadataTTL: "-1",
			envInstallTunnelHosts: "https://github.com/", envInstallRegistryCredsFile: "npm.corp.example=" + filepath.Join(dir, "missing"),
		}, wantErr: []string{envInstallTLSTerminate, envInstallCacheBytes, envInstallCacheMetadataTTL, envInstallTunnelHosts, envInstallRegistryCredsFile}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, errs := loadInstallCache(envMap(tc.env), nil)
			if loadFailed(t, errs, tc.wantErr) {
				return
			}
			tc.check(t, c)
		})
	}
}

// buildEgress makes the worker's CA (key 0600) and the cache under
// GILF_DATA_DIR, and a second start finds the same CA.
func TestBuildEgress(t *testing.T) {
	dataDir := t.TempDir()
	cfg, err := Load(envMap(map[string]string{"GILF_DATA_DIR": dataDir, envInstallCacheBytes: strconv.FormatInt(MinInstallCacheBytes, 10)}))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o, err := buildEgress(cfg, nil, WorkerRegistries{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if o.CA == nil || o.Cache == nil || o.RootCAs == nil {
		t.Fatalf("%+v", o)
	}
	// Warm disks live under GILF_DATA_DIR, and go with the cache.
	if w, err := warmDisks(cfg); err != nil || w.Dir != filepath.Join(dataDir, WarmDisksDirName) || w.MaxBytes != 20<<30 {
		t.Errorf("warm disks %+v, %v", w, err)
	}
	for _, env := range []map[string]string{{envInstallCacheBytes: "0"}, {envInstallWarmBytes: "0"}} {
		env["GILF_DATA_DIR"] = dataDir
		off, err := Load(envMap(env))
		if err != nil {
			t.Fatal(err)
		}
		if w, err := warmDisks(off); err != nil || w.Dir != "" {
			t.Errorf("%v: warm disks %+v, %v; want off", env, w, err)
		}
	}
	st, err := os.Stat(filepath.Join(dataDir, EgressCADirName, egress.CAKeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", st, err)
	}
	again, err := buildEgress(cfg, nil, WorkerRegistries{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.CA.PEM()) != string(o.CA.PEM()) {
		t.Error("a restart made a new CA")
	}
	m := &serveMetrics{reg: prometheus.NewRegistry()}
	m.registerCache(o.Cache)
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "gilf_install_cache_") {
			names = append(names, f.GetName())
		}
	}
	if len(names) != 4 {
		t.Errorf("cache metrics %v, want 4", names)
	}
}
