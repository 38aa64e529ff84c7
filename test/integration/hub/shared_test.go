package hub

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestSharedPlacements: two
// FleetVMs of the same intent in two namespaces share one candidate
// Placement, which the real OCM scheduler decides without
// numberOfClusters (every prod cluster the VM fits on); the hub picks each
// one's cluster from it, never the dev cluster nor the full one. The
// candidate Placement outlives the first FleetVM deleted and goes with the
// last.
func TestSharedPlacements(t *testing.T) {
	ctx := t.Context()
	s := shape("3", "3Gi")
	publishScores(t, "prod-a", map[string]int32{s.Name(): 4})
	publishScores(t, "prod-b", map[string]int32{s.Name(): 0})
	publishScores(t, "dev-a", map[string]int32{s.Name(): 4})

	fvms := []*fleetv1alpha1.FleetVirtualMachine{
		utiltesting.MakeFleetVM("shared-a", "x").Env("prod").Clusters(1).VM(3, "3Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyOrphan).Obj(),
		utiltesting.MakeFleetVM("shared", "a-x").Env("prod").Clusters(1).VM(3, "3Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyOrphan).Obj(),
	}
	var placement string
	for _, fvm := range fvms {
		createFVM(t, fvm)
		got := waitFor(t, client.ObjectKeyFromObject(fvm), "placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			return isTrue(f, fleetv1alpha1.ConditionPlaced)
		})
		if d := decided(got); len(d) != 1 || d[0] != "prod-a" {
			t.Errorf("%s placed on %v, want [prod-a] (prod-b is full, dev-a is dev)", fvm.Name, d)
		}
		name := got.Status.Placement.Name
		if !strings.HasPrefix(name, fleetvirtualmachine.CandidatePlacementPrefix) || placement != "" && name != placement {
			t.Fatalf("%s/%s uses Placement %q, want the candidate Placement shared with the first (%q)", fvm.Namespace, fvm.Name, name, placement)
		}
		placement = name
	}
	var p clusterv1beta1.Placement
	key := client.ObjectKey{Namespace: argoNS, Name: placement}
	if err := fleet.Hub.Client.Get(ctx, key, &p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.NumberOfClusters != nil {
		t.Errorf("candidate Placement asks for %d clusters, want every one", *p.Spec.NumberOfClusters)
	}
	// No Placement of their own.
	for _, fvm := range fvms {
		if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &clusterv1beta1.Placement{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s has a Placement of its own: %v", fvm.Name, err)
		}
	}

	// The first deleted: the other still uses the candidate Placement.
	deleteFVM(t, fvms[0])
	if err := fleet.Hub.Client.Get(ctx, key, &clusterv1beta1.Placement{}); err != nil {
		t.Fatalf("candidate Placement after its first user was deleted: %v", err)
	}
	// The last: it goes.
	deleteFVM(t, fvms[1])
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		return apierrors.IsNotFound(fleet.Hub.Client.Get(ctx, key, &clusterv1beta1.Placement{})), nil
	}); err != nil {
		t.Fatalf("candidate Placement %s not deleted with its last user: %v", placement, err)
	}
}

// deleteFVM deletes an Orphan FleetVM and waits until it is gone, Argo
// CD's part done by hand.
func deleteFVM(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	ctx := t.Context()
	if err := fleet.Hub.Client.Delete(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	finishArgoDeletion(t, fvm)
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		return apierrors.IsNotFound(fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(fvm), &fleetv1alpha1.FleetVirtualMachine{})), nil
	}); err != nil {
		t.Fatalf("%s/%s not gone: %v", fvm.Namespace, fvm.Name, err)
	}
}
