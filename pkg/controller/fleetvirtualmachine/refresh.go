package fleetvirtualmachine

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// refreshIfMissing asks Argo CD to refresh the ApplicationSet when one of
// the Applications it lists is missing for long enough, and returns when
// to look again.
func (r *Reconciler) refreshIfMissing(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, appSet *argoapp.ApplicationSet, apps map[string]*argoapp.Application) (time.Duration, error) {
	now := r.Clock.Now()
	since := now
	if c := meta.FindStatusCondition(fvm.Status.Conditions, fleetv1alpha1.ConditionDelivered); c != nil && c.Reason == fleetv1alpha1.ReasonApplicationsMissing {
		since = c.LastTransitionTime.Time
	}
	refresh, wait := delivery.NextRefresh(delivery.Targets(appSet), apps, delivery.SetAside(appSet), since, appSet.Annotation(delivery.AnnotationRefreshRequested), now)
	if !refresh {
		return wait, nil
	}
	if _, err := write.Mutate(ctx, r.Client, appSet, func() {
		if appSet.Annotations == nil {
			appSet.Annotations = map[string]string{}
		}
		appSet.Annotations[delivery.AnnotationArgoRefresh] = "true"
		appSet.Annotations[delivery.AnnotationRefreshRequested] = now.UTC().Format(time.RFC3339)
	}); err != nil {
		return 0, fmt.Errorf("ask Argo CD to refresh ApplicationSet %s: %w", klog.KObj(appSet), err)
	}
	return wait, nil
}
