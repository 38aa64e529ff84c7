package fleetvirtualmachine

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestReportedCopiesByOneIndex: VM reports are indexed under the
// FleetVirtualMachine they name and the VMs they list in one index
// (IndexReport). A FleetVirtualMachine still finds exactly the copies of
// its VM: its own report's, and another report's listing its VM in its
// namespace (a FleetVM deleted with Orphan), never a report that only
// lists a VM named like the FleetVirtualMachine, nor another FleetVM's
// copies, nor a report of another namespace.
func TestReportedCopiesByOneIndex(t *testing.T) {
	ctx := t.Context()
	const ns = "team"
	report := func(cluster, fvmNS, fvmName string, vms ...string) *fleetv1alpha1.VMReport {
		r := &fleetv1alpha1.VMReport{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: fvmNS + "." + fvmName},
			Spec: fleetv1alpha1.VMReportSpec{FleetVM: fleetv1alpha1.FleetVMReference{Namespace: fvmNS, Name: fvmName}}}
		for _, vm := range vms {
			r.Spec.VMs = append(r.Spec.VMs, fleetv1alpha1.VMState{Namespace: ns, Name: vm, PrintableStatus: "Running"})
		}
		return r
	}
	// web delivers the VM "server"; db delivers the VM "db".
	web := utiltesting.MakeFleetVM(ns, "web").VM(1, "1Gi").VMName("server").Obj()
	db := utiltesting.MakeFleetVM(ns, "db").VM(1, "1Gi").Obj()
	b := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(
		report("a", ns, "web", "server"),    // web's own copy
		report("b", ns, "old", "server"),    // left by a FleetVM deleted with Orphan
		report("c", "other", "x", "server"), // another namespace's
		report("d", ns, "web2", "web"),      // a VM named like web, not web's
		report("a", ns, "db", "db"),         // db's own copy
		report("e", ns, "olddb", "db"),      // db's, left by a FleetVM deleted with Orphan
		report("f", ns, "web", "other"),     // web's report of a VM not its own
	)
	if err := SetupIndexes(ctx, utiltesting.Indexer{Builder: b}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: b.Build()}
	for _, tc := range []struct {
		fvm       *fleetv1alpha1.FleetVirtualMachine
		copies    []string
		reporting []string
	}{
		{fvm: web, copies: []string{"a", "b"}, reporting: []string{"a", "f"}},
		{fvm: db, copies: []string{"a", "e"}, reporting: []string{"a"}},
	} {
		got, err := r.reportedCopies(ctx, tc.fvm)
		if err != nil {
			t.Fatal(err)
		}
		var clusters []string
		for c := range got {
			clusters = append(clusters, c)
		}
		slices.Sort(clusters)
		if !slices.Equal(clusters, tc.copies) {
			t.Errorf("%s: copies reported on %v, want %v", client.ObjectKeyFromObject(tc.fvm), clusters, tc.copies)
		}
		reporting, err := r.stillReported(ctx, tc.fvm)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(reporting, tc.reporting) {
			t.Errorf("%s: its reports on %v, want %v", client.ObjectKeyFromObject(tc.fvm), reporting, tc.reporting)
		}
	}
}
