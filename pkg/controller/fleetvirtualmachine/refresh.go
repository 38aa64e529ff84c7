package fleetvirtualmachine

import (
	"context"
	"fmt"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/write"
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
	annotationArgoRefresh      = "argocd.argoproj.io/application-set-refresh"
	annotationRefreshRequested = "fleetvm.io/refresh-requested"
	refreshAfter               = 10 * time.Second
	refreshEvery               = 20 * time.Second
)

// nextRefresh says whether to ask Argo CD for a refresh now, or in how
// long to look again (0: nothing is missing).
func nextRefresh(listed []string, apps map[string]*argov1alpha1.Application, missingSince time.Time, lastRequested string, now time.Time) (refresh bool, wait time.Duration) {
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

// refreshIfMissing asks Argo CD to refresh the ApplicationSet when one of
// the Applications it lists is missing for long enough, and returns when
// to look again.
func (r *Reconciler) refreshIfMissing(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, appSet *argov1alpha1.ApplicationSet, apps map[string]*argov1alpha1.Application) (time.Duration, error) {
	now := r.Clock.Now()
	since := now
	if c := meta.FindStatusCondition(fvm.Status.Conditions, fleetv1alpha1.ConditionDelivered); c != nil && c.Reason == fleetv1alpha1.ReasonApplicationsMissing {
		since = c.LastTransitionTime.Time
	}
	refresh, wait := nextRefresh(appSetTargets(appSet), apps, since, appSet.Annotations[annotationRefreshRequested], now)
	if !refresh {
		return wait, nil
	}
	if _, err := write.Mutate(ctx, r.Client, appSet, func() {
		if appSet.Annotations == nil {
			appSet.Annotations = map[string]string{}
		}
		appSet.Annotations[annotationArgoRefresh] = "true"
		appSet.Annotations[annotationRefreshRequested] = now.UTC().Format(time.RFC3339)
	}); err != nil {
		return 0, fmt.Errorf("ask Argo CD to refresh ApplicationSet %s: %w", klog.KObj(appSet), err)
	}
	return wait, nil
}
