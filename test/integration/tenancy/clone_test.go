package tenancy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// cloneAttack is a template of alice's whose only dataVolumeTemplate
// clones team-b's data: marker is the name of what it clones, found in
// whatever would carry the attack to a cluster.
type cloneAttack struct {
	name, field, marker string
	spec                map[string]any
}

var cloneAttacks = []cloneAttack{
	{
		name: "clone-pvc", field: "spec.template.spec.dataVolumeTemplates[0].spec.source.pvc.namespace", marker: "secret-db-disk",
		spec: map[string]any{"source": map[string]any{"pvc": map[string]any{"namespace": "team-b", "name": "secret-db-disk"}}},
	},
	{
		name: "clone-datasource", field: "spec.template.spec.dataVolumeTemplates[0].spec.sourceRef.namespace", marker: "secret-db-source",
		spec: map[string]any{"sourceRef": map[string]any{"kind": "DataSource", "namespace": "team-b", "name": "secret-db-source"}},
	},
	{
		name: "clone-snapshot", field: "spec.template.spec.dataVolumeTemplates[0].spec.source.snapshot.namespace", marker: "secret-db-snapshot",
		spec: map[string]any{"source": map[string]any{"snapshot": map[string]any{"namespace": "team-b", "name": "secret-db-snapshot"}}},
	},
}

// cloning is a FleetVirtualMachine of team-a whose VM boots from a
// dataVolumeTemplate with spec (its storage added).
func cloning(name string, spec map[string]any) *fleetv1alpha1.FleetVirtualMachine {
	dvSpec := map[string]any{"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}}}
	for k, v := range spec {
		dvSpec[k] = v
	}
	return utiltesting.MakeFleetVM("team-a", name).VMSpec("dataVolumeTemplates", []any{map[string]any{
		"metadata": map[string]any{"name": name + "-root"},
		"spec":     dvSpec,
	}}).Obj()
}

// TestCloneFromAnotherNamespace: alice's inline VM clones team-b's PVC,
// a DataSource in team-b, or a VolumeSnapshot in team-b. On a cluster
// CDI would authorize the clone as Argo CD's account, which may read
// everything. Each is refused at admission naming the field and why; and
// with the webhooks off (failurePolicy Ignore, fleetvm-hub's webhook
// server down), each is stored but shown InvalidSpec, and nothing
// carries it towards a cluster: no ApplicationSet, no Application, no VM.
// A clone from team-a's own namespace, created the same way, is
// delivered: the checks for what did not happen can see it happen.
func TestCloneFromAnotherNamespace(t *testing.T) {
	ctx := t.Context()
	for _, a := range cloneAttacks {
		fvm := cloning(a.name, a.spec)
		refused(t, alice.Create(ctx, fvm), fvm, a.field, "a FleetVirtualMachine in namespace team-a may clone only from its own namespace", "team-b is another namespace")
	}

	webhooksOff(t)
	own := cloning("clone-own", map[string]any{"source": map[string]any{"pvc": map[string]any{"namespace": "team-a", "name": "own-db-disk"}}})
	for _, fvm := range append([]*fleetv1alpha1.FleetVirtualMachine{own}, attackObjects()...) {
		createPastAdmission(t, fvm)
	}
	// The control: delivered, its clone source in the ApplicationSet.
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		return len(carriers(t, "own-db-disk")) > 0, nil
	})
	if err != nil {
		t.Fatalf("a clone from team-a's own namespace was never delivered: %v", err)
	}
	for _, a := range cloneAttacks {
		key := client.ObjectKey{Namespace: "team-a", Name: a.name}
		got := waitFVM(t, key, "shown InvalidSpec naming "+a.field, func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			for _, ct := range []string{fleetv1alpha1.ConditionReady, fleetv1alpha1.ConditionPlaced} {
				c := meta.FindStatusCondition(f.Status.Conditions, ct)
				if c == nil || c.Reason != fleetv1alpha1.ReasonInvalidSpec || c.ObservedGeneration != f.Generation ||
					!strings.Contains(c.Message, a.field) || !strings.Contains(c.Message, "may clone only from its own namespace") {
					return false
				}
			}
			return true
		})
		if len(got.Status.Clusters) != 0 {
			t.Errorf("%s: placed on %+v", a.name, got.Status.Clusters)
		}
		var appSets argov1alpha1.ApplicationSetList
		if err := fleet.Hub.Client.List(ctx, &appSets, client.InNamespace(argoNS), client.MatchingLabels{
			fleetv1alpha1.LabelFleetVMNamespace: "team-a", fleetv1alpha1.LabelFleetVMName: a.name,
		}); err != nil {
			t.Fatal(err)
		}
		if len(appSets.Items) != 0 {
			t.Errorf("%s: %d ApplicationSets labelled with it", a.name, len(appSets.Items))
		}
		if c := carriers(t, a.marker); len(c) > 0 {
			t.Errorf("%s: team-b's %s is carried by %v", a.name, a.marker, c)
		}
	}
}

// attackObjects are the FleetVirtualMachines of cloneAttacks.
func attackObjects() []*fleetv1alpha1.FleetVirtualMachine {
	var out []*fleetv1alpha1.FleetVirtualMachine
	for _, a := range cloneAttacks {
		out = append(out, cloning(a.name, a.spec))
	}
	return out
}

// webhooksOff turns the hub's FleetVM webhooks off (failurePolicy Ignore,
// server unreachable) until the test ends; then they are back and admission
// refuses again before the next test starts.
func webhooksOff(t *testing.T) {
	t.Helper()
	restore, err := fleet.WebhooksOff(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Fatal(err)
		}
		probe := cloning("admission-probe", cloneAttacks[0].spec)
		err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
			err := alice.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			return apierrors.IsInvalid(err), nil
		})
		if err != nil {
			t.Fatalf("admission does not refuse again after the webhooks are back: %v", err)
		}
	})
}

// createPastAdmission creates fvm as alice once the API server no longer
// calls the webhooks (until then they refuse it), and deletes it when the
// test ends.
func createPastAdmission(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		err := alice.Create(t.Context(), fvm.DeepCopy())
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsInvalid(err):
			return false, nil // the webhook still answers
		default:
			return false, err
		}
	})
	if err != nil {
		t.Fatalf("create %s with the webhooks off: %v", fvm.Name, err)
	}
	remove(t, fvm)
}

// carriers lists what holds marker on its way to a cluster or there:
// ApplicationSets and Applications in Argo CD's namespace, VMs on every
// spoke.
func carriers(t *testing.T, marker string) []string {
	t.Helper()
	var out []string
	holds := func(kind, name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), marker) {
			out = append(out, kind+" "+name)
		}
	}
	var appSets argov1alpha1.ApplicationSetList
	if err := fleet.Hub.Client.List(t.Context(), &appSets, client.InNamespace(argoNS)); err != nil {
		t.Fatal(err)
	}
	for _, a := range appSets.Items {
		holds("ApplicationSet", a.Name, a.Spec)
	}
	var apps argov1alpha1.ApplicationList
	if err := fleet.Hub.Client.List(t.Context(), &apps, client.InNamespace(argoNS)); err != nil {
		t.Fatal(err)
	}
	for _, a := range apps.Items {
		holds("Application", a.Name, a.Spec)
	}
	for _, cluster := range []string{"prod-a", "secure-a"} {
		var vms kubevirtv1.VirtualMachineList
		if err := fleet.Spoke(cluster).Client.List(t.Context(), &vms); err != nil {
			t.Fatal(err)
		}
		for _, vm := range vms.Items {
			holds("VirtualMachine on "+cluster, vm.Namespace+"/"+vm.Name, vm.Spec)
		}
	}
	return out
}
