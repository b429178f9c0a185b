package store

import (
	"context"
	"database/sql"

	"github.com/gilf-review/gilf/validation"
)

// Engine names the database behind a DB.
type Engine string

const (
	// EngineSQLite is the embedded default: one file under GILF_DATA_DIR.
	EngineSQLite Engine = "sqlite"
	// EnginePostgres is a PostgreSQL server shared by every replica.
	EnginePostgres Engine = "postgres"
)

// engine is what differs between the databases behind a DB. SQLite's
// (sqliteEngine, sqlite*.go) and PostgreSQL's (postgresEngine,
// postgres*.go) implement it; nothing else in the package asks which
// engine it runs on.
type engine interface {
	name() Engine

	// writeTx are the options of a write transaction; claimTx those of a
	// claim's, whose statement is claimSQL; intakeTx those of an intake
	// batch whose deliveries touch only their own pull requests' jobs
	// (byPR), which takes lockPRs first and notify last.
	writeTx() *sql.TxOptions
	claimTx() *sql.TxOptions
	claimSQL() string
	intakeTx(byPR bool) *sql.TxOptions
	lockPRs(ctx context.Context, tx *sql.Tx, keys []int64) error
	notify(ctx context.Context, tx *sql.Tx) error
	// retryable reports whether a failed write transaction may run again.
	retryable(err error) bool

	// jsonEach is the table of a JSON array's elements as text, in a
	// column named value (param: the placeholder of the array's text);
	// dayOf is the UTC day (YYYY-MM-DD) of a column of Unix milliseconds.
	jsonEach(param string) string
	dayOf(col string) string
	// recordNewSQL is sqlRecordNew where the engine runs it ("": the
	// plain statements).
	recordNewSQL() string
	// insertJob inserts the job of a new reviewed state, queued, or
	// superseded when a newer head of the pull request came first: its id
	// and state, or sql.ErrNoRows when the state has its job. It runs the
	// statements jobInsertSQL names, or sqlInsJob when they are "".
	insertJob(ctx context.Context, st boundStmts, del validation.Delivery, job *validation.JobSpec, now int64) (int64, string, error)
	jobInsertSQL() [3]string
	// chains are the groups of a batch's deliveries that recordChain
	// records together, each at the place of its first delivery; a chain
	// that meets a delivery it cannot record fails with errFollowUp, and
	// the batch runs again without chains.
	chains(batch []*intakeReq) [][]int
	recordChain(ctx context.Context, st boundStmts, batch []*intakeReq, idx []int, results []intakeRes) error

	// commit records a writer's batch and answers each delivery of it;
	// betweenBatches runs between two of a writer's batches, and
	// writerDone when the writer stops.
	commit(ctx context.Context, batch []*intakeReq)
	betweenBatches(ctx context.Context)
	writerDone()

	// durable makes every commit so far durable; failed is why the
	// engine's own files refuse writes (a failed fsync), or nil;
	// checkWritable, inside a write transaction, is why the database
	// takes no writes, or nil.
	durable() error
	failed() error
	checkWritable(ctx context.Context, tx *sql.Tx) error

	// rowBody is a body as its row's column holds it, decoded;
	// loggedBody a body the row names in SQLite's body log.
	rowBody(b []byte) ([]byte, error)
	loggedBody(ref bodyRef) ([]byte, error)
	// pruneBodies drops the bodies of the deliveries received before
	// cutoff (Prune).
	pruneBodies(ctx context.Context, cutoff int64, res *PruneResult) error

	backup(ctx context.Context, dest string) (BackupResult, error)
	listen(ctx context.Context, wake chan<- struct{}) error
	exclusive(ctx context.Context, name string, fn func(context.Context) error) (bool, error)
	// close releases what the engine holds, once the writers stopped.
	close() error
}
