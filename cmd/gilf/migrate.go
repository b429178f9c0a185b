package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gilf-review/gilf/store"
)

// runMigrate is `gilf migrate`: creates the data dir and the database when
// missing, applies pending migrations (each in its own transaction, as
// every start does) and prints the schema version. It lets an operator
// migrate before rolling out a new version.
func runMigrate(ctx context.Context, env Env, args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(env.Stderr, "usage: gilf migrate (no arguments; GILF_DATA_DIR names the data dir)")
		return exitUsage
	}
	cfg, err := Load(env.Getenv)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf migrate: configuration:\n%v\n", err)
		return exitUsage
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		fmt.Fprintf(env.Stderr, "gilf migrate: %v\n", err)
		return exitUsage
	}
	path := storeWhere(cfg)
	db, err := openStore(ctx, cfg, newLogger(env.Stderr, cfg.Log), store.Options{}, false)
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf migrate: %v\n", err)
		return exitUsage
	}
	v, verr := db.SchemaVersion(ctx)
	if err := db.Close(); err != nil {
		fmt.Fprintf(env.Stderr, "gilf migrate: close: %v\n", err)
		return exitUsage
	}
	if verr != nil {
		fmt.Fprintf(env.Stderr, "gilf migrate: %v\n", verr)
		return exitUsage
	}
	fmt.Fprintf(env.Stdout, "%s: schema version %d\n", path, v)
	return exitOK
}
