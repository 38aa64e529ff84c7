package delivery

import (
	"time"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// Argo CD's ApplicationSet controller sets aside an Application whose
// destination cluster it does not know yet (no cluster secret: a cluster
// new to its set, whose GitOpsCluster import lags) and looks again only
// after three minutes; a list generator is not requeued when the secret
// appears (only cluster generators are). It says so in the
// ApplicationSet's status: ErrorOccurred, reason
// ApplicationValidationError. So while an Application the ApplicationSet
// lists is missing and Argo CD reports having set one aside, FleetVM asks
// for a refresh with Argo CD's own annotation: first refreshAfter after
// the Application went missing, then at most every refreshEvery. An
// Application that is merely not made yet (Argo CD has not come to the
// ApplicationSet: a burst) is not a reason: a refresh would only add to
// Argo CD's queue.
const (
	AnnotationArgoRefresh      = "argocd.argoproj.io/application-set-refresh"
	AnnotationRefreshRequested = "fleetvm.io/refresh-requested"
	refreshAfter               = 10 * time.Second
	refreshEvery               = 20 * time.Second
)

// SetAside tells whether Argo CD reports, in the ApplicationSet's status,
// that it set aside an Application it could not make.
func SetAside(appSet *argoapp.ApplicationSet) bool {
	for _, c := range appSet.Status.Conditions {
		if c.Type == argoapp.ApplicationSetConditionErrorOccurred {
			return c.Status == argoapp.ApplicationSetConditionStatusTrue &&
				c.Reason == argoapp.ApplicationSetReasonApplicationValidationError
		}
	}
	return false
}

// NextRefresh says whether to ask Argo CD for a refresh now, or in how
// long to look again (0: nothing to ask for). setAside is SetAside of the
// ApplicationSet: without it there is nothing to ask for, and no reason
// to look again before an event (in a burst, every FleetVirtualMachine
// looked again every 10 to 20 s while Argo CD worked through its queue).
func NextRefresh(listed []string, apps map[string]*argoapp.Application, setAside bool, missingSince time.Time, lastRequested string, now time.Time) (refresh bool, wait time.Duration) {
	missing := false
	for _, c := range listed {
		if apps[c] == nil {
			missing = true
		}
	}
	if !missing || !setAside {
		// Nothing to ask for: the Application's creation, or Argo CD's
		// status write when it sets one aside, wakes the reconcile.
		return false, 0
	}
	next := missingSince.Add(refreshAfter)
	if last, err := time.Parse(time.RFC3339, lastRequested); err == nil && last.Add(refreshEvery).After(next) {
		next = last.Add(refreshEvery)
	}
	if now.Before(next) {
		return false, next.Sub(now)
	}
	return true, refreshEvery
}
