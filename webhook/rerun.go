package webhook

import (
	"fmt"

	"github.com/gilf-review/gilf/validation"
)

// classifyRerun is the action table of check_run and check_suite. Only a
// rerequest (GitHub's Re-run button) of gilf's own App is acted on: a
// check run's external_id names the job (validation.MarkerID), a
// check suite names its head, whose jobs all run again. Another App's, or
// any when gilf's App id is not configured, is recorded and ignored; every
// other action (created, completed, requested_action…) is ignored.
func classifyRerun(event string, p payload, appID int64) decision {
	if p.Action != "rerequested" {
		return decision{status: validation.DeliveryIgnored, reason: event + " action " + quoteAction(p.Action) + " is not acted on", code: 202}
	}
	c := checkOf(event, p)
	if c == nil {
		return invalid(event + " object missing")
	}
	switch {
	case appID == 0:
		return decision{status: validation.DeliveryIgnored, reason: event + " rerequested, but gilf's App id is not configured", code: 202}
	case c.AppID != appID:
		return decision{status: validation.DeliveryIgnored, reason: fmt.Sprintf("%s rerequested for another App (app id %d)", event, c.AppID), code: 202}
	case p.Repository == nil || !validRepo(p.Repository.FullName):
		return invalid("repository full_name missing or malformed")
	case !validSHA(c.HeadSHA):
		return invalid("head sha is not 40 or 64 lower-case hex digits")
	}
	r := &validation.Rerun{Repo: p.Repository.FullName, HeadSHA: c.HeadSHA, Reason: "re-run requested"}
	if p.Installation != nil {
		r.InstallationID = p.Installation.ID
	}
	var reason string
	if event == "check_run" {
		st, job, _, ok := validation.ParseMarkerID(c.ExternalID)
		if !ok {
			return decision{status: validation.DeliveryIgnored, code: 202,
				reason: "check run rerequested, but its external_id " + quoteAction(c.ExternalID) + " names no gilf job"}
		}
		r.JobID, r.Store = job, st
		reason = fmt.Sprintf("re-run of job %d requested (check run %d)", job, c.ID)
	} else {
		reason = fmt.Sprintf("re-run of head %s requested (check suite %d)", c.HeadSHA, c.ID)
	}
	return decision{status: validation.DeliveryQueued, reason: reason, rerun: r, code: 202}
}
