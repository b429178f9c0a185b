package githubtest

import (
	"net/http"
	"strconv"
)

func (s *Server) createReview(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !s.number(w, r) {
		return
	}
	ev, _ := body["event"].(string)
	state := map[string]string{"COMMENT": "COMMENTED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "APPROVE": "APPROVED"}[ev]
	if state == "" || body["body"] == nil {
		s.writeFault(w, Fault{Kind: Validation})
		return
	}
	comments, ok := draftComments(body["comments"])
	if !ok {
		s.writeFault(w, Fault{Kind: Validation})
		return
	}
	rv := s.example("pulls.create-review.response.200.default.json")
	rv["body"] = body["body"]
	rv["commit_id"] = body["commit_id"]
	rv["state"] = state
	user := rv["user"].(map[string]any)
	user["login"] = s.opts.BotLogin
	user["type"] = "Bot"
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	rv["id"] = s.nextID
	s.reviews = append(s.reviews, rv)
	if len(comments) > 0 {
		if s.reviewComments == nil {
			s.reviewComments = map[int64][]map[string]any{}
		}
		s.reviewComments[s.nextID] = comments
		s.openThreadsLocked(comments)
	}
	writeJSON(w, http.StatusOK, cloneValue(rv))
}

// draftComments reads a create-review request's comments[] as GitHub
// does for line comments: each needs a path, a body and a line (1 or
// more); side, when given, is LEFT or RIGHT (default RIGHT). Any other
// shape, or a comment without them, fails the whole review (GitHub
// answers 422 and creates nothing). The deprecated position form is not
// served. The comments are returned as recorded: path, line (an int),
// side and body.
func draftComments(v any) ([]map[string]any, bool) {
	if v == nil {
		return nil, true
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		c, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		path, _ := c["path"].(string)
		text, _ := c["body"].(string)
		line, _ := c["line"].(float64)
		side, hasSide := c["side"].(string)
		if !hasSide && c["side"] == nil {
			side = "RIGHT"
		}
		if path == "" || text == "" || line < 1 || line != float64(int(line)) || (side != "RIGHT" && side != "LEFT") {
			return nil, false
		}
		out = append(out, map[string]any{"path": path, "line": int(line), "side": side, "body": text})
	}
	return out, true
}

func (s *Server) listReviews(w http.ResponseWriter, r *http.Request, _ map[string]any) {
	if !s.number(w, r) {
		return
	}
	var all []map[string]any
	s.load("pulls.list-reviews.response.200.default.json", &all)
	all = append(all, s.Reviews()...)
	s.paginate(w, r, all)
}

// updateReview is PUT /repos/{o}/{r}/pulls/{n}/reviews/{id}: it replaces
// the body and answers 200 with the review. body is required (422).
func (s *Server) updateReview(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !s.number(w, r) {
		return
	}
	text, ok := body["body"].(string)
	if !ok {
		s.writeFault(w, Fault{Kind: Validation})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := s.reviewLocked(r.PathValue("id"))
	if rv == nil {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	rv["body"] = text
	writeJSON(w, http.StatusOK, cloneValue(rv))
}

// dismissReview is PUT …/reviews/{id}/dismissals: message is required;
// only a review that requests changes or approves can be dismissed (422
// otherwise, as GitHub answers "Can not dismiss a commented pull
// request review"). The review's state becomes DISMISSED.
func (s *Server) dismissReview(w http.ResponseWriter, r *http.Request, body map[string]any) {
	if !s.number(w, r) {
		return
	}
	if msg, _ := body["message"].(string); msg == "" {
		s.writeFault(w, Fault{Kind: Validation})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := s.reviewLocked(r.PathValue("id"))
	if rv == nil {
		s.basicError(w, http.StatusNotFound, "Not Found")
		return
	}
	if st := rv["state"]; st != "CHANGES_REQUESTED" && st != "APPROVED" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"message":           "Can not dismiss a " + map[any]string{"COMMENTED": "commented", "DISMISSED": "dismissed", "PENDING": "pending"}[st] + " pull request review",
			"documentation_url": "https://docs.github.com/rest/pulls/reviews#dismiss-a-review-for-a-pull-request",
			"status":            "422",
		})
		return
	}
	rv["state"] = "DISMISSED"
	s.dismissals = append(s.dismissals, Dismissal{ReviewID: rv["id"].(int64), Message: body["message"].(string)})
	writeJSON(w, http.StatusOK, cloneValue(rv))
}

// reviewLocked finds a posted review by the id in the path; s.mu is held.
func (s *Server) reviewLocked(id string) map[string]any {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil
	}
	for _, rv := range s.reviews {
		if rv["id"] == n {
			return rv
		}
	}
	return nil
}

// Dismissal is one review dismissal that landed.
type Dismissal struct {
	ReviewID int64
	Message  string
}

// Reviews returns the reviews posted, in their current state (body
// after updates, state after dismissals), as GitHub would list them.
func (s *Server) Reviews() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, 0, len(s.reviews))
	for _, rv := range s.reviews {
		out = append(out, cloneValue(rv).(map[string]any))
	}
	return out
}

// ReviewBodies returns the current body of each posted review, in the
// order they were posted.
func (s *Server) ReviewBodies() []string {
	var out []string
	for _, rv := range s.Reviews() {
		b, _ := rv["body"].(string)
		out = append(out, b)
	}
	return out
}

// Review returns posted review id in its current state.
func (s *Server) Review(id int64) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rv := s.reviewLocked(strconv.FormatInt(id, 10))
	if rv == nil {
		return nil, false
	}
	return cloneValue(rv).(map[string]any), true
}

// ReviewComments returns the inline comments posted with review id, in
// the order of the request, each with path, line (an int), side and
// body; nil when it had none.
func (s *Server) ReviewComments(reviewID int64) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, c := range s.reviewComments[reviewID] {
		out = append(out, cloneValue(c).(map[string]any))
	}
	return out
}

// Dismissals returns the dismissals that landed, in order.
func (s *Server) Dismissals() []Dismissal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Dismissal(nil), s.dismissals...)
}
