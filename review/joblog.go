package review

import (
	"log/slog"

	"github.com/gilf-review/gilf/internal/logkey"
)

// JobLogger is l with the keys of job j: every line about a job carries
// its id, repository, pull request and head, said once here.
func JobLogger(l *slog.Logger, j Job) *slog.Logger {
	return l.With(logkey.JobID, j.ID, logkey.Repo, j.FullName(), logkey.PR, j.Number, logkey.HeadSHA, j.HeadSHA)
}
