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
	writeJSON(w, http.StatusOK, cloneValue(rv))
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

// Dismissals returns the dismissals that landed, in order.
func (s *Server) Dismissals() []Dismissal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Dismissal(nil), s.dismissals...)
}
