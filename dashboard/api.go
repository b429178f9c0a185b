package dashboard

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gilf-review/gilf/store"
)

// The JSON API under /api/v1/. Field names are snake_case and stable
// (README "Dashboard" lists them); times are RFC 3339 UTC; an unknown
// value — a cost without a price, a time that has not happened — is null,
// never 0.

type runJSON struct {
	ID          int64      `json:"id"`
	JobID       int64      `json:"job_id"`
	Repo        string     `json:"repo"`
	PR          int        `json:"pr"`
	HeadSHA     string     `json:"head_sha"`
	Outcome     string     `json:"outcome"`
	Reason      *string    `json:"reason"`
	RefusalCode *string    `json:"refusal_code"`
	Executor    *string    `json:"executor"`
	Tier        *string    `json:"isolation_tier"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	DurationMs  *int64     `json:"duration_ms"`
	Findings    int        `json:"findings"`
	USD         *float64   `json:"usd"`
}

func stamp(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toRunJSON(s store.RunSummary) runJSON {
	j := runJSON{ID: s.ID, JobID: s.JobID, Repo: s.Repo, PR: s.PR, HeadSHA: s.HeadSHA, Outcome: string(s.Outcome),
		Reason: orNull(s.Reason), RefusalCode: orNull(string(s.Refusal)), Executor: orNull(s.Executor), Tier: orNull(string(s.Tier)),
		StartedAt: stamp(s.Started), FinishedAt: stamp(s.Finished), Findings: s.Findings, USD: s.USD}
	if !s.Started.IsZero() && !s.Finished.IsZero() {
		d := s.Finished.Sub(s.Started).Milliseconds()
		j.DurationMs = &d
	}
	return j
}

type runsJSON struct {
	Runs       []runJSON `json:"runs"`
	NextBefore *int64    `json:"next_before"`
}

func (h *Handler) apiRuns(r *http.Request) (any, error) {
	f, err := parseRunFilter(r.URL.Query())
	if err != nil {
		return nil, err
	}
	page, err := h.cfg.Reader.RunList(r.Context(), f.Query)
	if err != nil {
		return nil, err
	}
	out := runsJSON{Runs: make([]runJSON, 0, len(page.Runs))}
	for _, s := range page.Runs {
		out.Runs = append(out.Runs, toRunJSON(s))
	}
	if page.Next != 0 {
		out.NextBefore = &page.Next
	}
	return out, nil
}

type artifactJSON struct {
	Key    string  `json:"key"`
	Kind   string  `json:"kind"`
	Bytes  int64   `json:"bytes"`
	SHA256 string  `json:"sha256"`
	Status string  `json:"status"`
	URL    *string `json:"url"`
	// OpenURL is the dashboard's link that opens the object (a path
	// under /dashboard), null without an evidence store or upload.
	OpenURL *string `json:"open_url"`
	Error   *string `json:"error"`
}

type shadowJSON struct {
	Executor    string             `json:"executor"`
	Outcome     *string            `json:"outcome"`
	Error       *string            `json:"error"`
	StepsAgreed int                `json:"steps_agreed"`
	StepsTotal  int                `json:"steps_total"`
	WallMs      int64              `json:"wall_ms"`
	USD         *float64           `json:"usd"`
	Steps       []store.ShadowStep `json:"steps"`
}

type runDetailJSON struct {
	Run       runJSON         `json:"run"`
	Record    json.RawMessage `json:"record"` // the validation record, as gilf stores it
	Artifacts []artifactJSON  `json:"artifacts"`
	Shadow    *shadowJSON     `json:"shadow"`
}

func (h *Handler) apiRun(r *http.Request) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	v, err := h.cfg.Reader.RunView(r.Context(), id)
	if err != nil {
		return nil, err
	}
	rec, err := json.Marshal(v.Record)
	if err != nil {
		return nil, err
	}
	out := runDetailJSON{Run: toRunJSON(v.RunSummary), Record: rec, Artifacts: make([]artifactJSON, 0, len(v.Artifacts))}
	for _, a := range v.Artifacts {
		out.Artifacts = append(out.Artifacts, artifactJSON{Key: a.Key, Kind: a.Kind, Bytes: a.Bytes, SHA256: a.SHA256,
			Status: a.Status, URL: orNull(safeURL(a.URL)), OpenURL: orNull(h.openURL(a)), Error: orNull(a.Err)})
	}
	if s := v.Shadow; s != nil {
		out.Shadow = &shadowJSON{Executor: s.Executor, Outcome: orNull(string(s.Outcome)), Error: orNull(s.Err),
			StepsAgreed: s.StepsAgreed, StepsTotal: s.StepsTotal, WallMs: s.Wall.Milliseconds(), USD: s.USD, Steps: s.Steps}
	}
	return out, nil
}

type costJSON struct {
	// Repository is the job's owner/name, with ?group=repository only.
	Repository  *string  `json:"repository,omitempty"`
	Day         string   `json:"day"`
	Executor    string   `json:"executor"`
	Lane        string   `json:"lane"`
	Spans       int      `json:"spans"`
	PricedSpans int      `json:"priced_spans"`
	USD         *float64 `json:"usd"`
	Seconds     float64  `json:"seconds"`
	// The semantic lane's tokens, summed; 0 for an executor's lane.
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

type costsJSON struct {
	Since string     `json:"since"`
	Group string     `json:"group"`
	Days  []costJSON `json:"days"`
}

func toCostJSON(c store.CostDay) costJSON {
	return costJSON{Day: c.Day, Executor: c.Executor, Lane: string(c.Lane), Spans: c.Spans,
		PricedSpans: c.Priced, USD: c.USD, Seconds: c.Seconds, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens}
}

func (h *Handler) apiCosts(r *http.Request) (any, error) {
	cq, err := h.parseCostQuery(r.URL.Query())
	if err != nil {
		return nil, err
	}
	out := costsJSON{Since: cq.since.Format(time.DateOnly), Group: cq.group, Days: []costJSON{}}
	if cq.group == groupRepository {
		rows, err := h.cfg.Reader.CostsByRepo(r.Context(), cq.since)
		if err != nil {
			return nil, err
		}
		for _, c := range rows {
			j := toCostJSON(c.CostDay)
			j.Repository = &c.Repo
			out.Days = append(out.Days, j)
		}
		return out, nil
	}
	rows, err := h.cfg.Reader.CostsByDay(r.Context(), cq.since)
	if err != nil {
		return nil, err
	}
	for _, c := range rows {
		out.Days = append(out.Days, toCostJSON(c))
	}
	return out, nil
}

type jobJSON struct {
	ID             int64         `json:"id"`
	Repo           string        `json:"repo"`
	PR             int           `json:"pr"`
	HeadSHA        string        `json:"head_sha"`
	State          string        `json:"state"`
	Reason         *string       `json:"reason"`
	Attempts       int           `json:"attempts"`
	Reruns         int           `json:"reruns"`
	LastError      *string       `json:"last_error"`
	NextAttemptAt  *time.Time    `json:"next_attempt_at"`
	LeaseOwner     *string       `json:"lease_owner"`
	LeaseExpiresAt *time.Time    `json:"lease_expires_at"`
	CreatedAt      *time.Time    `json:"created_at"`
	UpdatedAt      *time.Time    `json:"updated_at"`
	History        []attemptJSON `json:"attempt_history"`
}

// attemptJSON is one attempt at a job.
type attemptJSON struct {
	Rerun     int        `json:"rerun"`
	Attempt   int        `json:"attempt"`
	Worker    *string    `json:"worker"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"` // null while it runs
	Result    *string    `json:"result"`   // null while it runs
	Error     *string    `json:"error"`
	Reason    *string    `json:"reason"`
}

func toJobJSON(j store.JobView, hist []store.JobAttempt) jobJSON {
	out := jobJSON{ID: j.ID, Repo: j.Repo, PR: j.PR, HeadSHA: j.HeadSHA, State: j.State,
		Reason: orNull(j.Reason), Attempts: j.Attempts, Reruns: j.Reruns, LastError: orNull(j.LastError),
		NextAttemptAt: stamp(j.NextAttemptAt), LeaseOwner: orNull(j.LeaseOwner), LeaseExpiresAt: stamp(j.LeaseExpires),
		CreatedAt: stamp(j.CreatedAt), UpdatedAt: stamp(j.UpdatedAt), History: make([]attemptJSON, 0, len(hist))}
	if j.State != "queued" {
		out.NextAttemptAt = nil // only a queued job waits for a time
	}
	for _, a := range hist {
		out.History = append(out.History, attemptJSON{Rerun: a.Rerun, Attempt: a.Attempt, Worker: orNull(a.Owner),
			StartedAt: stamp(a.Started), EndedAt: stamp(a.Ended), Result: orNull(a.Result), Error: orNull(a.Error),
			Reason: orNull(a.Reason)})
	}
	return out
}

func (h *Handler) apiJobs(r *http.Request) (any, error) {
	states, err := parseStates(r.URL.Query())
	if err != nil {
		return nil, err
	}
	jobs, err := h.cfg.Reader.JobList(r.Context(), store.JobQuery{States: states})
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	hist, err := h.cfg.Reader.JobAttempts(r.Context(), ids)
	if err != nil {
		return nil, err
	}
	out := struct {
		Jobs []jobJSON `json:"jobs"`
	}{Jobs: make([]jobJSON, 0, len(jobs))}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, toJobJSON(j, hist[j.ID]))
	}
	return out, nil
}

func (h *Handler) apiJob(r *http.Request) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	j, err := h.cfg.Reader.JobDetail(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return struct {
		Job  jobJSON `json:"job"`
		Runs []int64 `json:"run_ids"`
	}{Job: toJobJSON(j.JobView, j.History), Runs: j.Runs}, nil
}

func (h *Handler) apiRefusals(r *http.Request) (any, error) {
	days, err := parseDays(r.URL.Query())
	if err != nil {
		return nil, err
	}
	codes, err := h.cfg.Reader.RefusalCounts(r.Context(), h.since(days))
	if err != nil {
		return nil, err
	}
	type codeJSON struct {
		Code      string     `json:"code"`
		Runs      int        `json:"runs"`
		LastRunAt *time.Time `json:"last_run_at"`
	}
	out := struct {
		Refusals []codeJSON `json:"refusals"`
	}{Refusals: make([]codeJSON, 0, len(codes))}
	for _, c := range codes {
		out.Refusals = append(out.Refusals, codeJSON{Code: string(c.Code), Runs: c.Runs, LastRunAt: stamp(c.Last)})
	}
	return out, nil
}

func (h *Handler) apiShadow(r *http.Request) (any, error) {
	days, err := parseDays(r.URL.Query())
	if err != nil {
		return nil, err
	}
	pairs, err := h.cfg.Reader.ShadowPairs(r.Context(), h.since(days))
	if err != nil {
		return nil, err
	}
	type pairJSON struct {
		Primary          string   `json:"primary"`
		Shadow           string   `json:"shadow"`
		Runs             int      `json:"runs"`
		OutcomesAgreed   int      `json:"outcomes_agreed"`
		Errors           int      `json:"errors"`
		StepsAgreed      int      `json:"steps_agreed"`
		StepsTotal       int      `json:"steps_total"`
		OutcomeAgreement *float64 `json:"outcome_agreement"`
		StepAgreement    *float64 `json:"step_agreement"`
	}
	rate := func(a, b int) *float64 {
		if b == 0 {
			return nil
		}
		v := float64(a) / float64(b)
		return &v
	}
	out := struct {
		Pairs []pairJSON `json:"pairs"`
	}{Pairs: make([]pairJSON, 0, len(pairs))}
	for _, p := range pairs {
		out.Pairs = append(out.Pairs, pairJSON{Primary: p.Primary, Shadow: p.Shadow, Runs: p.Runs,
			OutcomesAgreed: p.OutcomesAgreed, Errors: p.Errors, StepsAgreed: p.StepsAgreed, StepsTotal: p.StepsTotal,
			OutcomeAgreement: rate(p.OutcomesAgreed, p.Runs), StepAgreement: rate(p.StepsAgreed, p.StepsTotal)})
	}
	return out, nil
}
