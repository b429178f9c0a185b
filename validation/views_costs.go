package validation

// RepoCostDay is the cost of one executor's lane for one repository on
// one UTC day: the row of the costs grouped by repository.
type RepoCostDay struct {
	Repo string // owner/name of the job the spans belong to
	CostDay
}
