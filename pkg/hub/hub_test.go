package hub

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// TestCachedFleetVMListsAtTheirLength: a FleetVirtualMachine the cache
// decoded keeps its status lists in arrays of their length, not the
// doubled ones the decoder grew, and reads the same.
func TestCachedFleetVMListsAtTheirLength(t *testing.T) {
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-1", Namespace: "bench", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Status: fleetv1alpha1.FleetVirtualMachineStatus{
			Placement:  &fleetv1alpha1.PlacementStatus{Name: "fvm.candidates-1", DecidedClusters: []string{"cluster-1", "cluster-2", "cluster-3"}},
			DiskImages: []fleetv1alpha1.DiskImageUsage{{Image: "containerdisk:a"}, {Image: "containerdisk:b"}, {Image: "containerdisk:c"}},
		},
	}
	for i := range 6 {
		fvm.Status.Conditions = append(fvm.Status.Conditions, metav1.Condition{Type: fmt.Sprintf("Type%d", i), Status: metav1.ConditionTrue, Reason: "AsExpected"})
	}
	for i := range 3 {
		fvm.Status.Clusters = append(fvm.Status.Clusters, fleetv1alpha1.ClusterStatus{
			Cluster: fmt.Sprintf("cluster-%d", i+1), Phase: "Running", IPAddresses: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"},
		})
	}

	in := decoded(t, fvm)
	if cap(in.Status.Clusters) == len(in.Status.Clusters) || cap(in.Status.Conditions) == len(in.Status.Conditions) {
		t.Fatalf("the decoder grew no room (clusters %d of %d, conditions %d of %d): nothing to test",
			len(in.Status.Clusters), cap(in.Status.Clusters), len(in.Status.Conditions), cap(in.Status.Conditions))
	}
	got := cached(t, in).(*fleetv1alpha1.FleetVirtualMachine)

	if got.ManagedFields != nil {
		t.Errorf("managed fields kept: %v", got.ManagedFields)
	}
	want := fvm.DeepCopy()
	want.ManagedFields = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cached FleetVirtualMachine = %+v\nwant %+v", got, want)
	}
	st := got.Status
	lists := map[string][2]int{
		"conditions":      {len(st.Conditions), cap(st.Conditions)},
		"clusters":        {len(st.Clusters), cap(st.Clusters)},
		"diskImages":      {len(st.DiskImages), cap(st.DiskImages)},
		"decidedClusters": {len(st.Placement.DecidedClusters), cap(st.Placement.DecidedClusters)},
	}
	for i, c := range st.Clusters {
		lists[fmt.Sprintf("clusters[%d].ipAddresses", i)] = [2]int{len(c.IPAddresses), cap(c.IPAddresses)}
	}
	for name, lc := range lists {
		if lc[0] != lc[1] {
			t.Errorf("status %s: %d elements in an array of %d", name, lc[0], lc[1])
		}
	}
}

// TestCacheDropsWhatTheHubNeverReads: kubectl's last-applied configuration
// of a FleetVirtualMachine and a VMReport's annotations (the agent's digest
// of what it wrote) are not cached; every other annotation of a
// FleetVirtualMachine is (the rollout's pause and abort are read).
func TestCacheDropsWhatTheHubNeverReads(t *testing.T) {
	fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm-1", Namespace: "bench"}}
	applied, err := json.Marshal(fvm)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ in, want map[string]string }{
		"applied with kubectl": {
			in:   map[string]string{corev1.LastAppliedConfigAnnotation: string(applied), fleetv1alpha1.AnnotationRolloutPaused: "true"},
			want: map[string]string{fleetv1alpha1.AnnotationRolloutPaused: "true"},
		},
		"only the applied configuration": {in: map[string]string{corev1.LastAppliedConfigAnnotation: string(applied)}},
		"not applied with kubectl": {
			in:   map[string]string{fleetv1alpha1.AnnotationRolloutPaused: "true"},
			want: map[string]string{fleetv1alpha1.AnnotationRolloutPaused: "true"},
		},
		"no annotation": {},
	} {
		in := fvm.DeepCopy()
		in.Annotations = tc.in
		got := cached(t, decoded(t, in)).(*fleetv1alpha1.FleetVirtualMachine)
		if !reflect.DeepEqual(got.Annotations, tc.want) {
			t.Errorf("%s: cached annotations %v, want %v", name, got.Annotations, tc.want)
		}
	}

	r := report()
	r.Annotations = map[string]string{write.HashAnnotation: "d163d856123db929"}
	if got := cached(t, decoded(t, r)).(*fleetv1alpha1.VMReport); got.Annotations != nil || got.Labels != nil {
		t.Errorf("cached VMReport: annotations %v, labels %v, want none", got.Annotations, got.Labels)
	}
}
