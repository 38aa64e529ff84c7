package delivery

import (
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
)

// Argo CD's ApplicationSet controller sets aside an Application whose
// destination cluster it does not know yet (no cluster secret: a cluster
// new to its set, whose GitOpsCluster import lags) and looks again only
// after three minutes; a list generator is not requeued when the secret
// appears (only cluster generators are). So while an Application the
// ApplicationSet lists is missing, FleetVM asks for a refresh with Argo
// CD's own annotation: first refreshAfter after the Application went
// missing, then at most every refreshEvery.
const (
	AnnotationArgoRefresh      = "argocd.argoproj.io/application-set-refresh"
	AnnotationRefreshRequested = "fleetvm.io/refresh-requested"
	refreshAfter               = 10 * time.Second
	refreshEvery               = 20 * time.Second
)

// NextRefresh says whether to ask Argo CD for a refresh now, or in how
// long to look again (0: nothing is missing).
func NextRefresh(listed []string, apps map[string]*argov1alpha1.Application, missingSince time.Time, lastRequested string, now time.Time) (refresh bool, wait time.Duration) {
	missing := false
	for _, c := range listed {
		if apps[c] == nil {
			missing = true
		}
	}
	if !missing {
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
