// Package store is gilf's durable state — webhook deliveries, review jobs
// with their leases and retries, and everything a run produced (steps,
// findings, artifacts, cost spans, shadow telemetry, posted reviews) — as
// one contract with two engines: store/sqlite (modernc.org/sqlite, no
// cgo; the embedded default) and store/postgres (replicas sharing one
// database). Each engine's Open builds a *DB with New on its own Driver.
//
// A *DB's queries are written once, in SQLite's dialect: store/postgres's
// connections rewrite the placeholders. What differs between the engines
// is the Driver interface (driver.go), implemented in the engines'
// packages; nothing in this package asks which engine it runs on, and the
// engines import this package, never the other way round.
// store/storetest is the conformance suite: store/sqlite and
// store/postgres each run it on themselves.
//
// # Adding a query to both engines
//
//  1. A method on *DB in a file of its own (store/<feature>.go): the SQL
//     once, with ? placeholders; reads on d.r, writes in d.writeTx
//     (IMMEDIATE on SQLite, SERIALIZABLE and retried on PostgreSQL).
//  2. SQL text one engine lacks (a JSON or date function) comes from a
//     method of Driver, implemented in store/sqlite and store/postgres,
//     never from an `if` on the engine.
//  3. A schema change is a migration for each engine, in its dialect:
//     migrations/NNNN_name.sql (SQLite) and migrations/postgres/NNNN_name.sql
//     (PostgreSQL, numbered on its own).
//  4. Its conformance test in store/storetest/<feature>.go, a
//     func(t *testing.T, e Engine) added to the list in storetest.go: it
//     runs on SQLite and on PostgreSQL (each engine's TestConformance).
//
// Webhook deliveries are group-committed: a writer goroutine (SQLite has
// one: the file has one write lock; PostgreSQL one per
// postgres.IntakeWriters) batches the pending deliveries into a single
// transaction, makes it durable once (Driver.Durable) and answers each
// caller.
package store
