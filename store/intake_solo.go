package store

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/gilf-review/gilf/validation"
)

// On SQLite, a new head whose pull request has no other delivery in its
// batch — almost every delivery when many pull requests are busy — reads
// the older heads it supersedes with the pull request's newest update
// time, in one statement (sqlNewestAndOlder), and leaves their
// supersession to one statement for the whole batch (supersedeLater),
// run before the commit. Superseding each pull request's older heads with
// a statement of its own (sqlSupersede) made SQLite collect the rows in a
// temporary table first, as the statement changes the index it walks,
// once per delivery: measured at 64 concurrent deliveries over 500 pull
// requests, the supersession was a quarter of the writer's time. With the
// supersessions together, the store's CPU time per delivery in that shape
// is 0.90–0.91× of superseding at once, in the same run
// (BenchmarkSoloSupersede, 8 alternations, twice).
//
// Nothing else in the batch touches such a pull request's jobs, so
// superseding them at the end of the transaction ends as superseding them
// at once would: the same rows, the same reasons, in the same commit.

// soloPRs marks the deliveries of a batch (SQLite, pipelined, every
// delivery about its own pull request: see prLocks) whose pull request
// has no other delivery in the batch.
func soloPRs(batch []*intakeReq) []bool {
	keys := make([]string, len(batch)) // "": no job
	n := make(map[string]int, len(batch))
	for i, r := range batch {
		if r.job != nil {
			keys[i] = prKey(r.job)
			n[keys[i]]++
		}
	}
	solo := make([]bool, len(batch))
	for i, k := range keys {
		solo[i] = k != "" && n[k] == 1
	}
	return solo
}

// laterSupersessions are the older heads a batch's solo new heads
// supersede, each with the reason its new head gives.
type laterSupersessions struct {
	ids     []int64
	reasons []string
}

func (l *laterSupersessions) add(ids []int64, reason string) {
	for _, id := range ids {
		l.ids = append(l.ids, id)
		l.reasons = append(l.reasons, reason)
	}
}

// MaxSupersedeByID is the most older heads one statement of supersedeLater
// supersedes; more take several.
const MaxSupersedeByID = 64

// byIDSizes is how many sizes of sqlSupersedeByID are prepared: 1, 2, 4,
// … MaxSupersedeByID ids.
var byIDSizes = bits.Len(MaxSupersedeByID)

// sqlSupersedeByID supersedes k jobs by id, each with its own reason:
// ?(2j+1) is the j-th id, ?(2j+2) its reason, ?(2k+1) the time. Only
// unfinished jobs change, as with sqlSupersede.
func sqlSupersedeByID(k int) string {
	var reason, ids strings.Builder
	for j := range k {
		id, r := strconv.Itoa(2*j+1), strconv.Itoa(2*j+2)
		reason.WriteString(" WHEN ?" + id + " THEN ?" + r)
		if j > 0 {
			ids.WriteString(", ")
		}
		ids.WriteString("?" + id)
	}
	return `UPDATE jobs SET state = 'superseded', reason = CASE id` + reason.String() + ` END, updated_at = ?` +
		strconv.Itoa(2*k+1) + ` WHERE id IN (` + ids.String() + `) AND state IN ('queued', 'running')`
}

// supersedeLater runs a batch's deferred supersessions (see above), in
// statements of up to MaxSupersedeByID jobs; a statement's ids are padded
// to its prepared size by repeating the last one.
func (d *DB) supersedeLater(ctx context.Context, tx *sql.Tx, l *laterSupersessions, now int64) error {
	for start := 0; start < len(l.ids); start += MaxSupersedeByID {
		end := min(start+MaxSupersedeByID, len(l.ids))
		n := end - start
		size := bits.Len(uint(n - 1)) // the index of the smallest size >= n
		k := 1 << size
		args := make([]any, 0, 2*k+1)
		for j := range k {
			at := start + min(j, n-1)
			args = append(args, l.ids[at], l.reasons[at])
		}
		args = append(args, now)
		if _, err := tx.StmtContext(ctx, d.stmts.byID[size]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("supersede older heads: %w", err)
		}
	}
	return nil
}

// insertSoloJobSQLite is insertJobSQLite for a solo new head: the newest
// update time and the older heads a queued job would supersede (older)
// come in one row of one statement, and the caller leaves their
// supersession to later.
func insertSoloJobSQLite(ctx context.Context, st boundStmts, del validation.Delivery, job *validation.JobSpec, updated, now int64) (id int64, state string, older []int64, err error) {
	var newest sql.NullInt64
	var ids sql.NullString
	if err := st.newestOlder.QueryRowContext(ctx, job.Repo, job.PR, job.HeadSHA, job.BaseRef, updated).Scan(&newest, &ids); err != nil {
		return 0, "", nil, fmt.Errorf("newest update of %s#%d: %w", job.Repo, job.PR, err)
	}
	if ids.Valid {
		for f := range strings.SplitSeq(ids.String, ",") {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return 0, "", nil, fmt.Errorf("older heads of %s#%d: %q: %w", job.Repo, job.PR, ids.String, err)
			}
			older = append(older, id)
		}
	}
	id, state, err = insertJobAs(ctx, st, del, job, updated, now, newest)
	return id, state, older, err
}

// The statement of a solo new head (SQLite), one row: the pull request's
// newest update time (NULL without a job), and the ids, comma-separated,
// of the unfinished jobs of its other heads received no later than ?5 —
// sqlSupersede's rows (NULL without one).
const sqlNewestAndOlder = `SELECT
	(SELECT pr_updated_at FROM jobs INDEXED BY jobs_pr_updated
		WHERE repo = ?1 AND pr = ?2 ORDER BY pr_updated_at DESC LIMIT 1),
	(SELECT group_concat(id) FROM jobs INDEXED BY jobs_pr
		WHERE repo = ?1 AND pr = ?2 AND (head_sha <> ?3 OR base_ref <> ?4) AND state IN ('queued', 'running')
			AND pr_updated_at <= ?5)`
