// Package store keeps gilf's durable state: webhook deliveries, review
// jobs with their leases and retries, and everything a run produced
// (steps, findings, artifacts, cost spans, shadow telemetry, posted
// reviews), on one of two engines behind one contract: SQLite
// (modernc.org/sqlite, no cgo; the embedded default, Open) and
// PostgreSQL (replicas sharing one database, OpenPostgres).
//
// What differs between the engines is the engine interface (engine.go),
// implemented in the engines' own files (sqlite*.go, postgres*.go);
// nothing else in the package asks which engine it runs on. The SQL is
// written once, in SQLite's dialect: PostgreSQL's connections rewrite
// its placeholders (dialect.go). store/storetest is the conformance
// suite: every engine passes it.
//
// # Adding a query to both engines
//
//  1. A method on *DB in a file of its own (store/<feature>.go): the SQL
//     once, with ? placeholders; reads on d.r, writes in d.writeTx (IMMEDIATE
//     on SQLite, SERIALIZABLE and retried on PostgreSQL).
//  2. SQL text one engine lacks (a JSON or date function) comes from a
//     method of the engine interface, implemented in both engines' files,
//     never from an `if` on the engine.
//  3. A schema change is a migration for each engine, in its dialect:
//     migrations/NNNN_name.sql (SQLite) and migrations/postgres/NNNN_name.sql
//     (PostgreSQL, numbered on its own).
//  4. Its conformance test in store/storetest/<feature>.go, a
//     func(t *testing.T, e Engine) added to the list in storetest.go: it
//     runs on SQLite and on PostgreSQL (TestConformance).
//
// On SQLite, writes go through one writer connection whose transactions
// begin IMMEDIATE, so a transaction never has to upgrade a read lock to a
// write lock (the upgrade is what fails with SQLITE_BUSY despite
// busy_timeout). Webhook deliveries are group-committed: a writer
// goroutine batches the pending deliveries into a single transaction and
// each caller waits for its batch's commit. Reads use their own pool of
// query-only connections; in WAL mode they never wait for the writer.
package store
