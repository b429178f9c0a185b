package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// runBackup is `gilf backup DEST`: a consistent copy of the store —
// DEST/gilf.db and DEST/gilf.db.bodies — taken while `gilf serve` runs
// (store.Backup says why it is consistent). docs/operating.md says how to restore.
func runBackup(ctx context.Context, env Env, args []string) int {
	if len(args) != 1 || args[0] == "" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(env.Stderr, "usage: gilf backup DEST (a directory, made when missing, holding no earlier backup)")
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
			return exitOK
		}
		return exitUsage
	}
	dest, err := filepath.Abs(args[0])
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf backup: %v\n", err)
		return exitUsage
	}
	if err := os.MkdirAll(dest, 0o700); err != nil {
		fmt.Fprintf(env.Stderr, "gilf backup: %v\n", err)
		return exitUsage
	}
	db, code := openExistingStore(ctx, env, "gilf backup")
	if db == nil {
		return code
	}
	defer db.Close()
	res, err := db.Backup(ctx, filepath.Join(dest, DBFileName))
	if err != nil {
		fmt.Fprintf(env.Stderr, "gilf backup: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(env.Stdout, "backed up %d deliveries to %s\n", res.Deliveries, res.Path)
	return exitOK
}
