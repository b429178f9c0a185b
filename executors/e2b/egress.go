package e2b

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gilf-review/gilf/validation"
)

// denyAll is the CIDR that, in denyOut, closes all IPv4 egress; entries of
// allowOut still pass (E2B: allow beats deny).
const denyAll = "0.0.0.0/0"

// DefaultAllowOut are the registry hosts an install step of the package
// manager needs (corepack fetches pnpm and yarn from the npm registry;
// yarn berry's own releases come from repo.yarnpkg.com).
func DefaultAllowOut(pm validation.PackageManager) []string {
	switch pm {
	case validation.Yarn:
		return []string{"registry.yarnpkg.com", "registry.npmjs.org"}
	case validation.YarnBerry:
		return []string{"repo.yarnpkg.com", "registry.yarnpkg.com", "registry.npmjs.org"}
	default:
		return []string{"registry.npmjs.org"}
	}
}

// egressState is one egress policy of the sandbox.
type egressState struct {
	allowOut []string // empty: no egress at all
	// allowInternet is allow_internet_access; set (false) only when
	// nothing may leave.
	allowInternet *bool
}

func noEgress() egressState {
	f := false
	return egressState{allowInternet: &f}
}

func (s egressState) open() bool { return len(s.allowOut) > 0 }

// config is the network object sent for the state: deny everything, allow
// the listed hosts.
func (s egressState) config() *networkConfig {
	return &networkConfig{AllowOut: slices.Clone(s.allowOut), DenyOut: []string{denyAll}}
}

// update is the network update for the state (PUT replaces the rules).
func (s egressState) update() networkConfig {
	c := *s.config()
	c.AllowInternetAccess = s.allowInternet
	return c
}

// egressPlan says what egress the run's steps get: the registry hosts for
// a step whose Network is full, nothing for the others.
type egressPlan struct {
	initial  egressState
	registry egressState
	used     bool // some runnable step has network access
}

func planEgress(plan validation.Plan, allowOut, registry []string) egressPlan {
	hosts := allowOut
	if hosts == nil {
		hosts = DefaultAllowOut(plan.PackageManager)
		for _, h := range registry {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	p := egressPlan{initial: noEgress(), registry: egressState{allowOut: slices.Clone(hosts)}}
	if len(hosts) == 0 {
		p.registry = noEgress()
	}
	first := true
	for _, st := range plan.Steps {
		if st.Inconclusive != "" {
			continue
		}
		if st.Network == validation.NetworkRegistry {
			p.used = true
			if first {
				p.initial = p.registry
			}
		}
		first = false
	}
	return p
}

func (p egressPlan) want(st validation.Step) egressState {
	if st.Network == validation.NetworkRegistry {
		return p.registry
	}
	return noEgress()
}

func (p egressPlan) note() string {
	if !p.registry.open() || !p.used {
		return "egress: none for every step (allow_internet_access false, denyOut " + denyAll + ")"
	}
	return fmt.Sprintf("egress: steps with network access may reach only %s (denyOut %s); every other step runs with no egress",
		strings.Join(p.registry.allowOut, ", "), denyAll)
}

// netState switches the sandbox's egress between steps: a step runs only
// once its policy is in force.
type netState struct {
	api         *apiClient
	id          string
	egress      egressPlan
	current     egressState
	callTimeout time.Duration
	notes       []string
}

func (n *netState) prepare(ctx context.Context, st validation.Step) error {
	want := n.egress.want(st)
	if slices.Equal(want.allowOut, n.current.allowOut) {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, n.callTimeout)
	defer cancel()
	if err := n.api.setNetwork(cctx, n.id, want.update()); err != nil {
		return fmt.Errorf("e2b: set egress for step %q: %w", st.Name, err)
	}
	n.current = want
	if want.open() {
		n.notes = append(n.notes, fmt.Sprintf("egress opened to %s before step %q", strings.Join(want.allowOut, ", "), st.Name))
	} else {
		n.notes = append(n.notes, fmt.Sprintf("egress closed before step %q", st.Name))
	}
	return nil
}
