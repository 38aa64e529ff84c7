package fleetrun

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// WaitFVM polls a FleetVirtualMachine through c until cond holds, for at
// most timeout, and fails the test with what was awaited and the last
// status seen.
func WaitFVM(t testing.TB, c client.Reader, key client.ObjectKey, timeout time.Duration, what string, cond func(*fleetv1alpha1.FleetVirtualMachine) bool) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	err := fleetenv.Eventually(t.Context(), timeout, func() (bool, error) {
		if err := c.Get(t.Context(), key, fvm); err != nil {
			return false, err
		}
		return cond(fvm), nil
	})
	if err != nil {
		b, _ := json.MarshalIndent(fvm.Status, "", "  ") //nolint:errchkjson // a status always encodes; this is a failure message
		t.Fatalf("%s: %v\nstatus of %s: %s", what, err, key, b)
	}
	return fvm
}

// Applications lists the Argo CD Applications of the FleetVirtualMachine
// key, by cluster, as FleetVM labels them.
func Applications(t testing.TB, c client.Reader, argoNamespace string, key client.ObjectKey) map[string]argov1alpha1.Application {
	t.Helper()
	var list argov1alpha1.ApplicationList
	if err := c.List(t.Context(), &list, client.InNamespace(argoNamespace), client.MatchingLabels{
		fleetv1alpha1.LabelFleetVMName: key.Name, fleetv1alpha1.LabelFleetVMNamespace: key.Namespace,
	}); err != nil {
		t.Fatal(err)
	}
	out := map[string]argov1alpha1.Application{}
	for _, a := range list.Items {
		out[a.Labels[fleetv1alpha1.LabelCluster]] = a
	}
	return out
}

// PlacementName waits until the FleetVirtualMachine's status names its
// Placement (the candidate Placement it shares, or its own) and returns
// the name.
func PlacementName(t testing.TB, c client.Reader, key client.ObjectKey, timeout time.Duration) string {
	t.Helper()
	return WaitFVM(t, c, key, timeout, "status names its Placement", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.Placement != nil && f.Status.Placement.Name != ""
	}).Status.Placement.Name
}

// Placements lists the names of the Placements the FleetVirtualMachine
// uses: any labelled with its key (an earlier version's own Placement,
// which the hub removes) and the candidate Placement its status names. A
// converged FleetVirtualMachine uses exactly one.
func Placements(t testing.TB, c client.Reader, argoNamespace string, fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	t.Helper()
	var own clusterv1beta1.PlacementList
	if err := c.List(t.Context(), &own, client.InNamespace(argoNamespace), client.MatchingLabels{
		fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace,
	}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range own.Items {
		out = append(out, p.Name)
	}
	if p := fvm.Status.Placement; p != nil && p.Name != "" && !slices.Contains(out, p.Name) {
		err := c.Get(t.Context(), client.ObjectKey{Namespace: argoNamespace, Name: p.Name}, &clusterv1beta1.Placement{})
		switch {
		case err == nil:
			out = append(out, p.Name)
		case !apierrors.IsNotFound(err):
			t.Fatal(err)
		}
	}
	return out
}
