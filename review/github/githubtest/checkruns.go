package githubtest

import (
	"fmt"
	"net/http"
	"strconv"
)

// maxAnnotationsPerRequest is GitHub's limit: "The Checks API limits the
// number of annotations to a maximum of 50 per API request. To create
// more than 50 annotations, you have to make multiple requests to the
// Update a check run endpoint. Each time you update the check run,
// annotations are appended to the list of annotations that already exist
// for the check run."
const maxAnnotationsPerRequest = 50

// checkRun is a stored check run: the wire object GitHub answers with
// (output carries annotations_count and annotations_url, never the
// annotations) and the annotations appended so far.
type checkRun struct {
	obj         map[string]any
	annotations []map[string]any
	completions int // times a request set status completed
}

// checkRunFields are copied from a create or update request as they are.
var checkRunFields = []string{"name", "head_sha", "external_id", "details_url", "status", "conclusion", "started_at", "completed_at"}

func (s *Server) createCheckRun(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if body["name"] == nil || body["head_sha"] == nil {
		s.writeFault(w, Fault{Kind: Validation})
		return
	}
	annots, ok := s.checkOutput(w, body)
	if !ok {
		return
	}
	if body["status"] == "completed" && body["conclusion"] == nil {
		s.validationError(w, "conclusion", "missing_field", "conclusion is required when status is completed")
		return
	}
	cr := s.example("checks.create.response.201.example-of-completed-conclusion.json")
	cr["status"] = "queued"
	cr["conclusion"] = nil
	cr["started_at"] = s.opts.Now().UTC().Format("2006-01-02T15:04:05Z")
	cr["completed_at"] = nil
	cr["external_id"] = ""
	cr["output"] = map[string]any{"title": nil, "summary": nil, "text": nil}
	cr["app"].(map[string]any)["id"] = s.opts.AppID
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := s.nextID
	cr["id"] = id
	cr["url"] = fmt.Sprintf("https://api.github.com/repos/%s/%s/check-runs/%d", s.opts.Owner, s.opts.Repo, id)
	cr["html_url"] = fmt.Sprintf("https://github.com/%s/%s/runs/%d", s.opts.Owner, s.opts.Repo, id)
	run := &checkRun{obj: cr}
	s.applyCheckRun(run, body, annots)
	s.checkRuns = append(s.checkRuns, run)
	writeJSON(w, http.StatusCreated, cloneValue(cr))
}

func (s *Server) getCheckRun(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.checkRunLocked(r.PathValue("id"))
	if run == nil {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, cloneValue(run.obj))
}

// updateCheckRun merges the request into the stored run: fields given
// replace, output.title/summary/text replace, output.annotations are
// appended and counted.
func (s *Server) updateCheckRun(w http.ResponseWriter, r *http.Request, body map[string]any) {
	annots, ok := s.checkOutput(w, body)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.checkRunLocked(r.PathValue("id"))
	if run == nil {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	if body["status"] == "completed" && body["conclusion"] == nil && run.obj["conclusion"] == nil {
		s.validationError(w, "conclusion", "missing_field", "conclusion is required when status is completed")
		return
	}
	s.applyCheckRun(run, body, annots)
	writeJSON(w, http.StatusOK, cloneValue(run.obj))
}

// checkOutput validates a request's output and returns its annotations.
// It answers 422 as GitHub does: output needs title and summary, at most
// 50 annotations per request, each with path, start_line, end_line,
// annotation_level and message.
func (s *Server) checkOutput(w http.ResponseWriter, body map[string]any) ([]map[string]any, bool) {
	if st, ok := body["status"]; ok && st != "queued" && st != "in_progress" && st != "completed" {
		s.validationError(w, "status", "invalid", fmt.Sprintf("status %v is not included in the list", st))
		return nil, false
	}
	if c, ok := body["conclusion"].(string); ok {
		switch c {
		case "action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out":
		default:
			s.validationError(w, "conclusion", "invalid", "conclusion "+c+" is not included in the list")
			return nil, false
		}
	}
	out, ok := body["output"]
	if !ok {
		return nil, true
	}
	o, _ := out.(map[string]any)
	if o == nil || o["title"] == nil || o["summary"] == nil {
		s.validationError(w, "output", "missing_field", "output requires title and summary")
		return nil, false
	}
	raw, _ := o["annotations"].([]any)
	if len(raw) > maxAnnotationsPerRequest {
		s.validationError(w, "annotations", "invalid",
			fmt.Sprintf("Only %d annotations are allowed per request; got %d", maxAnnotationsPerRequest, len(raw)))
		return nil, false
	}
	var annots []map[string]any
	for i, x := range raw {
		a, _ := x.(map[string]any)
		for _, k := range []string{"path", "start_line", "end_line", "annotation_level", "message"} {
			if a == nil || a[k] == nil {
				s.validationError(w, "annotations", "missing_field", fmt.Sprintf("annotation %d: %s is required", i, k))
				return nil, false
			}
		}
		switch a["annotation_level"] {
		case "notice", "warning", "failure":
		default:
			s.validationError(w, "annotations", "invalid", fmt.Sprintf("annotation %d: annotation_level %v", i, a["annotation_level"]))
			return nil, false
		}
		annots = append(annots, a)
	}
	return annots, true
}

// applyCheckRun merges body into run; s.mu is held.
func (s *Server) applyCheckRun(run *checkRun, body map[string]any, annots []map[string]any) {
	cr := run.obj
	for _, k := range checkRunFields {
		if v, ok := body[k]; ok {
			cr[k] = v
		}
	}
	if c, ok := body["conclusion"].(string); ok && c != "" {
		// "Providing conclusion will automatically set the status
		// parameter to completed."
		cr["status"] = "completed"
	}
	if cr["status"] == "completed" {
		if body["status"] == "completed" || body["conclusion"] != nil {
			run.completions++
		}
		if cr["completed_at"] == nil {
			cr["completed_at"] = s.opts.Now().UTC().Format("2006-01-02T15:04:05Z")
		}
	}
	if o, ok := body["output"].(map[string]any); ok {
		out := cr["output"].(map[string]any)
		for _, k := range []string{"title", "summary", "text"} {
			if v, ok := o[k]; ok {
				out[k] = v
			}
		}
	}
	run.annotations = append(run.annotations, annots...)
	out := cr["output"].(map[string]any)
	out["annotations_count"] = len(run.annotations)
	out["annotations_url"] = fmt.Sprint(cr["url"]) + "/annotations"
}

// checkRunLocked finds a run by its id in the path; s.mu is held.
func (s *Server) checkRunLocked(id string) *checkRun {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil
	}
	for _, run := range s.checkRuns {
		if run.obj["id"] == n {
			return run
		}
	}
	return nil
}

func (s *Server) listCheckRuns(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	ref := r.PathValue("ref")
	name := r.URL.Query().Get("check_name")
	runs := []map[string]any{}
	for _, cr := range s.CheckRuns() {
		if cr["head_sha"] == ref && (name == "" || cr["name"] == name) {
			runs = append(runs, cr)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs})
}

// validationError answers 422 with GitHub's validation-error body.
func (s *Server) validationError(w http.ResponseWriter, field, code, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []any{map[string]any{"resource": "CheckRun", "field": field, "code": code, "message": msg}},
		"documentation_url": "https://docs.github.com/rest/checks/runs",
		"status":            "422",
	})
}

// CheckRuns returns the check runs posted, as GitHub would list them
// (copies: a later update does not change what was returned).
func (s *Server) CheckRuns() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, 0, len(s.checkRuns))
	for _, run := range s.checkRuns {
		out = append(out, cloneValue(run.obj).(map[string]any))
	}
	return out
}

// CheckRun returns the current state of check run id, as GET
// /repos/{o}/{r}/check-runs/{id} would.
func (s *Server) CheckRun(id int64) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.checkRunLocked(strconv.FormatInt(id, 10))
	if run == nil {
		return nil, false
	}
	return cloneValue(run.obj).(map[string]any), true
}

// Annotations returns every annotation check run id received, in the
// order they were appended.
func (s *Server) Annotations(checkRunID int64) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.checkRunLocked(strconv.FormatInt(checkRunID, 10))
	if run == nil {
		return nil
	}
	out := make([]map[string]any, 0, len(run.annotations))
	for _, a := range run.annotations {
		out = append(out, cloneValue(a).(map[string]any))
	}
	return out
}

// Completions counts the requests that completed check run id (a create
// or an update with status completed or a conclusion).
func (s *Server) Completions(checkRunID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if run := s.checkRunLocked(strconv.FormatInt(checkRunID, 10)); run != nil {
		return run.completions
	}
	return 0
}

// cloneValue deep-copies decoded JSON (maps and slices), keeping the
// scalar types.
func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneValue(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = cloneValue(e)
		}
		return s
	case []map[string]any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = cloneValue(e)
		}
		return s
	default:
		return v
	}
}
