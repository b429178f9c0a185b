package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gilf-review/gilf/internal/logkey"
	"github.com/gilf-review/gilf/store"
	"github.com/gilf-review/gilf/validation"
)

// The queue page, a job's page and their two moves: retry and cancel.

// JobPath is the page of a job, the check run's details_url: the job,
// every attempt with its error, and its runs.
func JobPath(id int64) string { return "/dashboard/jobs/" + strconv.FormatInt(id, 10) }

// jobStates are the states ?state= may name, in the order of a job's life.
func jobStates() []string {
	return []string{"queued", "running", "done", "failed", "dead", "superseded", "cancelled"}
}

// defaultJobStates are the states the queue page and /api/v1/jobs show
// unless asked otherwise: what waits, what runs, and what ended without a
// result.
func defaultJobStates() []string { return []string{"queued", "running", "failed", "dead", "cancelled"} }

// parseStates reads ?state=: comma-separated or repeated; none gives the
// defaults.
func parseStates(q url.Values) ([]string, error) {
	var out []string
	for _, v := range q["state"] {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			if !slices.Contains(jobStates(), s) {
				return nil, badRequest{"state: want a comma-separated list of " + strings.Join(jobStates(), ", ")}
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return defaultJobStates(), nil
	}
	// In the order of a job's life, whatever order they were asked in.
	slices.SortFunc(out, func(a, b string) int {
		return slices.Index(jobStates(), a) - slices.Index(jobStates(), b)
	})
	return out, nil
}

// jobRow is one job of the queue with its recorded attempts.
type jobRow struct {
	store.JobView
	History []store.JobAttempt
}

// stateSection is the queue page's list of one state.
type stateSection struct {
	State string
	Jobs  []jobRow
	CSRF  string
}

// stateChoice is a checkbox of the queue page's filter.
type stateChoice struct {
	State   string
	Checked bool
}

type queueData struct {
	Choices  []stateChoice
	Sections []stateSection
	Limit    int // each list shows at most this many
	Message  string
}

func (h *Handler) queuePage(r *http.Request, v *view) error {
	states, err := parseStates(r.URL.Query())
	if err != nil {
		return err
	}
	d := queueData{Limit: store.MaxRunPage}
	for _, s := range jobStates() {
		d.Choices = append(d.Choices, stateChoice{State: s, Checked: slices.Contains(states, s)})
	}
	// One read per state, so a long queue cannot hide the dead jobs.
	var ids []int64
	for _, s := range states {
		jobs, err := h.cfg.Reader.JobList(r.Context(), store.JobQuery{States: []string{s}, Limit: d.Limit})
		if err != nil {
			return err
		}
		sec := stateSection{State: s, CSRF: v.CSRF}
		for _, j := range jobs {
			sec.Jobs = append(sec.Jobs, jobRow{JobView: j})
			ids = append(ids, j.ID)
		}
		d.Sections = append(d.Sections, sec)
	}
	hist, err := h.cfg.Reader.JobAttempts(r.Context(), ids)
	if err != nil {
		return err
	}
	for i := range d.Sections {
		for k := range d.Sections[i].Jobs {
			j := &d.Sections[i].Jobs[k]
			j.History = hist[j.ID]
		}
	}
	d.Message = moveMessage(r.URL.Query())
	v.Template, v.Title, v.Active, v.Data = "queue", "Queue", "queue", d
	return nil
}

// moveMessage is what a retry or cancel redirect says.
func moveMessage(q url.Values) string {
	switch {
	case q.Get("requeued") != "":
		return "Job " + q.Get("requeued") + " was queued again as a re-run."
	case q.Get("unchanged") != "":
		return "Job " + q.Get("unchanged") + " was not queued again: it is " + q.Get("state") +
			", or a newer job of its pull request replaced it."
	case q.Get("cancelled") != "":
		return "Job " + q.Get("cancelled") + " was cancelled; a running attempt stops at its next heartbeat."
	case q.Get("kept") != "":
		return "Job " + q.Get("kept") + " was not cancelled: it is already " + q.Get("state") + "."
	}
	return ""
}

type jobData struct {
	Job     store.JobDetail
	Latest  int64 // the newest run; 0 when none
	CSRF    string
	Message string
	// Network is the newest run's steps that had a network: what the
	// egress proxy and its verifying cache did for each.
	Network []validation.StepResult
}

// jobPage shows one job: its facts, every attempt with its error, its
// runs, and the move its state allows.
func (h *Handler) jobPage(r *http.Request, v *view) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	j, err := h.cfg.Reader.JobDetail(r.Context(), id)
	if err != nil {
		return err
	}
	d := jobData{Job: j, CSRF: v.CSRF, Message: moveMessage(r.URL.Query())}
	if len(j.Runs) > 0 {
		d.Latest = j.Runs[0]
		run, err := h.cfg.Reader.RunView(r.Context(), d.Latest)
		if err != nil {
			return err
		}
		for _, st := range run.Record.Steps {
			if st.Egress != nil && st.Egress.Network != validation.NetworkNone {
				d.Network = append(d.Network, st)
			}
		}
	}
	v.Template, v.Title, v.Active, v.Data = "job", "Job "+strconv.FormatInt(id, 10), "queue", d
	return nil
}

// RerunReason is the reason a job re-queued from the dashboard carries.
const RerunReason = "re-run from the dashboard"

// CancelReason is the reason of a job cancelled from the dashboard.
const CancelReason = "cancelled from the dashboard"

// back is where a move returns to: the job's page when the form came
// from it (back=job), else the queue.
func back(r *http.Request, id int64, q url.Values) string {
	if r.PostFormValue("back") == "job" {
		return JobPath(id) + "?" + q.Encode()
	}
	return "/dashboard/queue?" + q.Encode()
}

func (h *Handler) retry(w http.ResponseWriter, r *http.Request, _ session) error {
	return h.move(w, r, func(id int64) (string, bool, error) { return h.cfg.Queue.RerunJob(r.Context(), id, RerunReason) },
		"requeued", "unchanged", "job re-queued from the dashboard")
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request, _ session) error {
	return h.move(w, r, func(id int64) (string, bool, error) {
		return h.cfg.Cancel.CancelQueuedJob(r.Context(), id, CancelReason)
	}, "cancelled", "kept", "job cancelled from the dashboard")
}

// move makes a job's move (do) and redirects back saying what came of it:
// ?<done>=id when it moved, else ?<kept>=id&state=its state.
func (h *Handler) move(w http.ResponseWriter, r *http.Request, do func(id int64) (string, bool, error), done, kept, logMsg string) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	state, ok, err := do(id)
	if err != nil {
		return err
	}
	q := url.Values{}
	if ok {
		h.cfg.Logger.Info(logMsg, logkey.JobID, id)
		q.Set(done, strconv.FormatInt(id, 10))
	} else {
		q.Set(kept, strconv.FormatInt(id, 10))
		q.Set("state", state)
	}
	http.Redirect(w, r, back(r, id, q), http.StatusSeeOther)
	return nil
}
