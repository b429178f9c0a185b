package main

import (
	"strings"
	"testing"
)

// systemdUnit is a unit file as systemd reads it: section → key → every
// value assigned, in order (an empty assignment resets a list).
type systemdUnit map[string]map[string][]string

func parseSystemdUnit(t *testing.T, rel string) systemdUnit {
	t.Helper()
	u := systemdUnit{}
	section := ""
	for i, line := range strings.Split(readRepoFile(t, rel), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is no key=value inside a section", rel, i+1, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u
}

// last is the value in force for a single-valued key.
func (u systemdUnit) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestDeploySystemdUnitHardening checks gilf.service's default profile
// (deploy/systemd/check also runs systemd-analyze verify and security on
// it): unprivileged, the data directory the only writable path, the usual
// hardening, and the environment file installed 0600.
func TestDeploySystemdUnitHardening(t *testing.T) {
	u := parseSystemdUnit(t, "deploy/systemd/gilf.service")
	want := map[string]string{
		"ExecStart":               "/usr/local/bin/gilf serve",
		"User":                    "gilf",
		"EnvironmentFile":         "/etc/gilf/env",
		"StateDirectory":          "gilf",
		"StateDirectoryMode":      "0700",
		"ProtectSystem":           "strict",
		"ReadWritePaths":          "/var/lib/gilf",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectControlGroups":    "yes",
		"RestrictNamespaces":      "yes",
		"RestrictSUIDSGID":        "yes",
		"SystemCallArchitectures": "native",
		"SystemCallFilter":        "@system-service",
		"UMask":                   "0077",
		"KillSignal":              "SIGTERM",
	}
	for k, v := range want {
		if _, ok := u["Service"][k]; !ok {
			t.Errorf("gilf.service [Service] has no %s", k)
		} else if got := u.last("Service", k); got != v {
			t.Errorf("gilf.service %s=%s, want %s", k, got, v)
		}
	}
	if env := strings.Join(u["Service"]["Environment"], " "); !strings.Contains(env, "GILF_DATA_DIR=/var/lib/gilf") {
		t.Errorf("gilf.service does not set GILF_DATA_DIR=/var/lib/gilf (Environment=%s)", env)
	}
	if u.last("Install", "WantedBy") != "multi-user.target" {
		t.Error("gilf.service is not WantedBy=multi-user.target")
	}
	for _, rel := range []string{"deploy/systemd/gilf.service", "deploy/systemd/gilf.env"} {
		if !strings.Contains(readRepoFile(t, rel), "install -m 0600") {
			t.Errorf("%s does not say to install the environment file with install -m 0600", rel)
		}
	}
	if !strings.Contains(readRepoFile(t, "docs/operating.md"), "install -m 0600") {
		t.Error("docs/operating.md does not say to install /etc/gilf/env with install -m 0600")
	}
	for _, line := range strings.Split(readRepoFile(t, "deploy/systemd/gilf.env"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && !strings.HasPrefix(line, "#") && (strings.Contains(k, "SECRET") || strings.Contains(k, "KEY")) && v != "" {
			t.Errorf("deploy/systemd/gilf.env ships a value for %s", k)
		}
	}
}

// TestDeploySystemdLocalExecutorDropIn: the local-executor profile undoes
// exactly what bwrap and the executor need, and keeps the rest.
func TestDeploySystemdLocalExecutorDropIn(t *testing.T) {
	u := parseSystemdUnit(t, "deploy/systemd/local-executor.conf")
	for k, v := range map[string]string{
		"User":                    "root",
		"PrivateDevices":          "no",
		"Delegate":                "yes",
		"ProtectControlGroups":    "no",
		"RestrictNamespaces":      "no",
		"RestrictAddressFamilies": "",
		"SystemCallFilter":        "",
	} {
		if _, ok := u["Service"][k]; !ok {
			t.Errorf("local-executor.conf has no %s", k)
		} else if got := u.last("Service", k); got != v {
			t.Errorf("local-executor.conf %s=%s, want %s", k, got, v)
		}
	}
	if !strings.Contains(strings.Join(u["Service"]["Environment"], " "), "GILF_ALLOW_LOCAL_VALIDATION=1") {
		t.Error("local-executor.conf does not set GILF_ALLOW_LOCAL_VALIDATION=1")
	}
	if caps := u.last("Service", "CapabilityBoundingSet"); !strings.Contains(caps, "CAP_SYS_ADMIN") || !strings.Contains(caps, "CAP_SETUID") {
		t.Errorf("local-executor.conf CapabilityBoundingSet=%s: the executor needs CAP_SYS_ADMIN and CAP_SETUID", caps)
	}
	for _, keep := range []string{"ProtectSystem", "ProtectHome", "PrivateTmp", "NoNewPrivileges"} {
		if _, ok := u["Service"][keep]; ok {
			t.Errorf("local-executor.conf changes %s, which bwrap does not need changed", keep)
		}
	}
}
