package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/gilf-review/gilf/evidence"
	"github.com/gilf-review/gilf/store/postgres"
)

func TestLoadDatabase(t *testing.T) {
	const dsn = "postgres://gilf:pw-in-url@db.internal:5432/gilf?sslmode=require"
	artifacts := EvidenceConfig{Options: evidence.Options{Enabled: true}}
	for _, tt := range []struct {
		name     string
		env      map[string]string
		ev       EvidenceConfig
		postgres bool
		conns    int
		shared   bool
	}{
		{"defaults: SQLite", nil, EvidenceConfig{}, false, postgres.DefaultMaxConns, false},
		{"postgres", map[string]string{DatabaseURLEnv: dsn}, EvidenceConfig{}, true, postgres.DefaultMaxConns, false},
		{"postgresql scheme", map[string]string{DatabaseURLEnv: "postgresql:///gilf?host=/run/pg"}, EvidenceConfig{}, true, postgres.DefaultMaxConns, false},
		{"conns at the bounds", map[string]string{DatabaseURLEnv: dsn, "GILF_DATABASE_MAX_CONNS": "1"}, EvidenceConfig{}, true, 1, false},
		{"conns at the top", map[string]string{"GILF_DATABASE_MAX_CONNS": "256"}, EvidenceConfig{}, false, MaxDatabaseConns, false},
		{"S3 evidence with postgres", map[string]string{DatabaseURLEnv: dsn},
			EvidenceConfig{Options: evidence.Options{Enabled: true}, S3Bucket: "b"}, true, postgres.DefaultMaxConns, false},
		{"shared filesystem evidence", map[string]string{DatabaseURLEnv: dsn, "GILF_EVIDENCE_FS_SHARED": "1"}, artifacts, true, postgres.DefaultMaxConns, true},
		{"filesystem evidence on SQLite", nil, artifacts, false, postgres.DefaultMaxConns, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := loadDatabase(func(k string) string { return tt.env[k] }, tt.ev, nil)
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("loadDatabase: %v", err)
			}
			if got.Postgres() != tt.postgres || got.MaxConns != tt.conns || got.FSShared != tt.shared {
				t.Fatalf("got postgres=%v conns=%d shared=%v", got.Postgres(), got.MaxConns, got.FSShared)
			}
		})
	}
}

func TestLoadDatabaseErrors(t *testing.T) {
	const dsn = "postgres://gilf:pw-in-url@db.internal/gilf"
	for _, tt := range []struct {
		env  map[string]string
		ev   EvidenceConfig
		says string
	}{
		{map[string]string{DatabaseURLEnv: "mysql://root:pw-in-url@h/db"}, EvidenceConfig{}, "want a postgres:// or postgresql:// URL"},
		{map[string]string{DatabaseURLEnv: "/var/lib/gilf/gilf.db"}, EvidenceConfig{}, "want a postgres:// or postgresql:// URL"},
		{map[string]string{DatabaseURLEnv: "postgres://gilf:pw-in-url@h:port/%zz"}, EvidenceConfig{}, "not a valid URL"},
		{map[string]string{"GILF_DATABASE_MAX_CONNS": "0"}, EvidenceConfig{}, `GILF_DATABASE_MAX_CONNS="0": want a whole number from 1 to 256`},
		{map[string]string{"GILF_DATABASE_MAX_CONNS": "257"}, EvidenceConfig{}, `GILF_DATABASE_MAX_CONNS="257"`},
		{map[string]string{"GILF_EVIDENCE_FS_SHARED": "yes"}, EvidenceConfig{}, `GILF_EVIDENCE_FS_SHARED="yes": want 1`},
		{map[string]string{DatabaseURLEnv: dsn}, EvidenceConfig{Options: evidence.Options{Enabled: true}},
			"set GILF_EVIDENCE_S3_BUCKET, or GILF_EVIDENCE_FS_SHARED=1"},
	} {
		_, errs := loadDatabase(func(k string) string { return tt.env[k] }, tt.ev, nil)
		err := errors.Join(errs...)
		if len(errs) != 1 || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("env %v: errors %v, want one saying %q", tt.env, errs, tt.says)
		}
		if err != nil && strings.Contains(err.Error(), "pw-in-url") {
			t.Errorf("env %v: the error shows the password: %v", tt.env, err)
		}
	}
}

func TestDatabaseURLIsAWorkerSecret(t *testing.T) {
	// A password in the query is no URL credential, and a URL without
	// one still names the worker's database: withheld whole.
	url := "postgres:///gilf?host=/run/pg&password=in-query"
	var found bool
	for _, s := range WorkerSecrets([]string{DatabaseURLEnv + "=" + url, "GILF_DATA_DIR=/srv/gilf"}) {
		if s.Name == DatabaseURLEnv && s.Value == url {
			found = true
		}
		if s.Name == "GILF_DATA_DIR" {
			t.Fatalf("GILF_DATA_DIR taken for a secret")
		}
	}
	if !found {
		t.Fatal("GILF_DATABASE_URL is not a worker secret")
	}
}

func TestStoreWhereHidesCredentials(t *testing.T) {
	for url, want := range map[string]string{
		"postgres://gilf:pw-in-url@db.internal:5432/gilf": "PostgreSQL db.internal:5432/gilf (GILF_DATABASE_URL)",
		"postgresql://gilf@/gilf?host=/run/pg":            "PostgreSQL /run/pg/gilf (GILF_DATABASE_URL)",
	} {
		got := storeWhere(Config{Database: DatabaseConfig{URL: Secret{v: url}}})
		if got != want {
			t.Errorf("storeWhere(%s) = %q, want %q", url, got, want)
		}
	}
	if got := storeWhere(Config{DataDir: "/srv/gilf"}); got != "/srv/gilf/"+DBFileName {
		t.Errorf("SQLite: %q", got)
	}
}

func TestCostRatesErrorNamesTheSettingOnce(t *testing.T) {
	_, errs := loadCosts(func(k string) string {
		if k == "GILF_VALIDATION_COST_RATES" {
			return `{"managed-e2b": {"vcpuUsdPerSec": -1, "memoryGibUsdPerSec": 0}}`
		}
		return ""
	}, nil)
	err := errors.Join(errs...)
	if err == nil || strings.Count(err.Error(), "GILF_VALIDATION_COST_RATES") != 1 {
		t.Fatalf("error %v: want GILF_VALIDATION_COST_RATES named once", err)
	}
}
