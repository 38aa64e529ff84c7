package kubectlfleetvm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestFillFromReports: the entries the status keeps brief are completed
// from the agents' VMReports; entries with details, unknown clusters and
// other FleetVMs' reports are left alone.
func TestFillFromReports(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := fleetv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	report := func(cluster, fvm string, vm fleetv1alpha1.VMState) *fleetv1alpha1.VMReport {
		return &fleetv1alpha1.VMReport{
			ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: "vms." + fvm},
			Spec:       fleetv1alpha1.VMReportSpec{FleetVM: fleetv1alpha1.FleetVMReference{Namespace: "vms", Name: fvm}, VMs: []fleetv1alpha1.VMState{vm}},
		}
	}
	running := fleetv1alpha1.VMState{Namespace: "vms", Name: "web", PrintableStatus: "Running", Ready: true, Node: "n1", IPAddresses: []string{"10.0.0.1"}}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&fleetv1alpha1.VMReport{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		WithObjects(report("a", "web", running), report("b", "web", running), report("c", "web", running), report("d", "other", running)).
		Build()
	detailed := fleetv1alpha1.ClusterStatus{Cluster: "a", Phase: "Running", Ready: true, PrintableStatus: "Running", Message: "kept", LastTransitionTime: ago(0)}
	fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"}}
	fvm.Status.Clusters = []fleetv1alpha1.ClusterStatus{
		detailed,
		{Cluster: "b", Phase: "Running", Ready: true},
		{Cluster: "c", Phase: "Unknown"},
		{Cluster: "d", Phase: "Running", Ready: true},
	}
	o := &options{client: c}
	if err := o.fillFromReports(t.Context(), fvm); err != nil {
		t.Fatal(err)
	}
	want := []fleetv1alpha1.ClusterStatus{
		detailed,
		{Cluster: "b", Phase: "Running", Ready: true, PrintableStatus: "Running", Node: "n1", IPAddresses: []string{"10.0.0.1"}, Message: "from the cluster's VMReport"},
		{Cluster: "c", Phase: "Unknown"},
		{Cluster: "d", Phase: "Running", Ready: true},
	}
	if diff := cmp.Diff(want, fvm.Status.Clusters); diff != "" {
		t.Errorf("clusters (-want,+got):\n%s", diff)
	}
}
