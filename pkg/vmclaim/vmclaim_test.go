package vmclaim

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestClaimantsOf: the index by VM holds only FleetVirtualMachines whose
// VM is of another name than theirs; the claimants of a VM are still
// every FleetVirtualMachine that delivers it: the one of its name, read by
// name, and those whose template names it. One of the VM's name that
// delivers another VM, or a git source, claims nothing.
func TestClaimantsOf(t *testing.T) {
	const ns = "team"
	git := utiltesting.MakeFleetVM(ns, "web").Obj()
	git.Spec.Template = nil
	git.Spec.Source = &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "web"}
	fvms := []client.Object{
		utiltesting.MakeFleetVM(ns, "db").VM(1, "1Gi").Obj(),                     // VM team/db
		utiltesting.MakeFleetVM(ns, "db-copy").VM(1, "1Gi").VMName("db").Obj(),   // VM team/db too
		utiltesting.MakeFleetVM(ns, "frontend").VM(1, "1Gi").VMName("web").Obj(), // VM team/web
		git, // team/web, a git source
		utiltesting.MakeFleetVM(ns, "cache").VM(1, "1Gi").VMName("redis").Obj(), // VM team/redis, not team/cache
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(fleetv1alpha1.AddToScheme(scheme))
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fvms...)
	if err := SetupIndex(t.Context(), utiltesting.Indexer{Builder: b}); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	for vm, want := range map[string][]string{
		"team/db":    {"db", "db-copy"},
		"team/web":   {"frontend"},
		"team/redis": {"cache"},
		"team/cache": nil,
		"team/none":  nil,
	} {
		claimants, err := ClaimantsOf(t.Context(), c, vm)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range claimants {
			got = append(got, f.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("claimants of VM %s: %v, want %v", vm, got, want)
		}
	}
	var indexed fleetv1alpha1.FleetVirtualMachineList
	if err := c.List(t.Context(), &indexed, client.MatchingFields{IndexVM: "team/db"}); err != nil {
		t.Fatal(err)
	}
	if len(indexed.Items) != 1 || indexed.Items[0].Name != "db-copy" {
		t.Errorf("index %s=team/db holds %d, want db-copy alone: a VM of its FleetVM's name is read by name", IndexVM, len(indexed.Items))
	}
}
