package kubectlfleetvm

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestRolloutStatusSaysWhy: rollout status names each waiting cluster's
// decision group and why it waits, in the hub's rule's words, from the
// status the hub recorded: with the canary group done, group 1 soaks
// and group 2 waits for it; a copy being moved waits for its move; a
// user who may not read ManagedClusters sees no groups and no reasons
// (the rule would read every cluster as group 0), and a note.
func TestRolloutStatusSaysWhy(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	web := utiltesting.MakeFleetVM("vms", "web").VM(1, "1Gi").Rollout(clusterv1alpha1.RolloutStrategy{
		Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{
			MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{MandatoryDecisionGroups: []clusterv1alpha1.MandatoryDecisionGroup{{GroupName: "canary"}}},
			RolloutConfig:           clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: 10 * time.Minute}},
		}}).Obj()
	web.Spec.Placement.DecisionStrategy = &clusterv1beta1.DecisionStrategy{GroupStrategy: clusterv1beta1.GroupStrategy{
		ClustersPerDecisionGroup: intstr.FromInt32(2),
		DecisionGroups: []clusterv1beta1.DecisionGroup{{GroupName: "canary", ClusterSelector: clusterv1beta1.GroupClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}}},
	}}
	since := metav1.NewTime(now.Add(-4 * time.Minute))
	ready := metav1.NewTime(now.Add(-3 * time.Minute))
	web.Status.Rollout = &fleetv1alpha1.RolloutStatus{Revision: 2, PreviousRevision: 1, Phase: "Progressing"}
	for _, c := range []string{"a", "b", "c", "d"} {
		web.Status.Clusters = append(web.Status.Clusters, fleetv1alpha1.ClusterStatus{Cluster: c, Phase: fleetv1alpha1.ClusterPhaseRunning, Ready: true})
	}
	// a, the canary, succeeded (no record); b soaks; c waits for its
	// move; d, in group 2, for group 1.
	web.Status.Clusters[1].Rollout = &fleetv1alpha1.ClusterRollout{Revision: 2, State: "Soaking", Since: &since, ReadySince: &ready}
	for i := 2; i < 4; i++ {
		web.Status.Clusters[i].Rollout = &fleetv1alpha1.ClusterRollout{Revision: 1, State: "ToApply"}
	}
	cluster := func(name string, labels map[string]string) *clusterv1.ManagedCluster {
		return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	moving := &fleetv1alpha1.FleetVirtualMachineMove{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "d-away"},
		Spec:   fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: "c"},
		Status: fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MovePreparing, To: "e"}}
	objs := []client.Object{web, moving, cluster("a", map[string]string{"ring": "canary"}), cluster("b", nil), cluster("c", nil), cluster("d", nil)}

	for name, tc := range map[string]struct {
		forbidden bool
		want      string
	}{
		"groups": {want: `CLUSTER  REVISION  STATE    GROUP  SINCE  READY SINCE  WHY
b        2         Soaking  1      4m     3m           ready, soaking until 2026-11-28T12:07:00Z
c        1         ToApply  1      -      -            waits for the move of its copy to end
d        1         ToApply  2      -      -            waits for decision group 1
`},
		"no right to read ManagedClusters": {forbidden: true, want: `decision groups, and why clusters wait, not shown: you may not read ManagedClusters
CLUSTER  REVISION  STATE    SINCE  READY SINCE  WHY
b        2         Soaking  4m     3m           -
c        1         ToApply  -      -            -
d        1         ToApply  -      -            -
`},
	} {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...)
			if tc.forbidden {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*clusterv1.ManagedCluster); ok {
						return apierrors.NewForbidden(schema.GroupResource{Group: clusterv1.GroupName, Resource: "managedclusters"}, key.Name, nil)
					}
					return c.Get(ctx, key, obj, opts...)
				}})
			}
			var out bytes.Buffer
			o := &options{client: b.Build(), out: &out, now: func() time.Time { return now }}
			why, err := o.explainRollout(t.Context(), web)
			if err != nil {
				t.Fatal(err)
			}
			if why.note != "" {
				out.WriteString(why.note + "\n")
			}
			if err := writeRolloutClusters(&out, web, why, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, lines(out.String())); diff != "" {
				t.Errorf("rollout clusters (-want +got):\n%s", diff)
			}
		})
	}
}
