package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/addon"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// refused checks that a create was refused at admission (Invalid), with
// every piece of the expected message, and that nothing was created.
func refused(t *testing.T, err error, obj client.Object, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want refused with %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Errorf("refused with %v (reason %s), want Invalid", err, apierrors.ReasonForError(err))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not say %q:\n%v", w, err)
		}
	}
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)); !apierrors.IsNotFound(err) {
		t.Errorf("the object exists after its refusal (%v)", err)
	}
}

// forbidden checks that the authorizer refused a request.
func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
	}
}

// TestProjectThatDoesNotServeTheNamespace: alice names the platform admins'
// project (anything, anywhere), and team-b's own project: refused. A project
// the operator shares with team-a is accepted, and its Applications run
// under it; with the field empty they run under team-a's own project.
func TestProjectThatDoesNotServeTheNamespace(t *testing.T) {
	for _, project := range []string{"platform-admin", "fleetvm-team-b"} {
		fvm := utiltesting.MakeFleetVM("team-a", "project-"+strings.ReplaceAll(project, "-", "")).Obj()
		fvm.Spec.Delivery.Project = project
		refused(t, alice.Create(t.Context(), fvm), fvm, "spec.delivery.project", "does not", project)
	}
	for project, want := range map[string]string{"team-a-shared": "team-a-shared", "": "fleetvm-team-a"} {
		fvm := utiltesting.MakeFleetVM("team-a", "project-ok-"+strings.TrimPrefix(want, "fleetvm-")).Obj()
		fvm.Spec.Delivery.Project = project
		if err := alice.Create(t.Context(), fvm); err != nil {
			t.Fatalf("project %q: %v", project, err)
		}
		remove(t, fvm)
		waitFVM(t, client.ObjectKeyFromObject(fvm), "delivered", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			return meta.IsStatusConditionTrue(f.Status.Conditions, fleetv1alpha1.ConditionDelivered)
		})
		var apps argov1alpha1.ApplicationList
		if err := fleet.Hub.Client.List(t.Context(), &apps, client.InNamespace(argoNS), client.MatchingLabels{
			fleetv1alpha1.LabelFleetVMNamespace: "team-a", fleetv1alpha1.LabelFleetVMName: fvm.Name,
		}); err != nil {
			t.Fatal(err)
		}
		for _, a := range apps.Items {
			if a.Spec.Project != want || a.Spec.Destination.Namespace != "team-a" {
				t.Errorf("Application %s: project %q destination %q, want %s and team-a", a.Name, a.Spec.Project, a.Spec.Destination.Namespace, want)
			}
		}
	}
}

// TestClusterSetNotBound: alice asks for the cluster set "restricted",
// never bound to team-a: refused; she cannot bind it herself; FleetVM does
// not bind it into the Argo CD namespace; nothing runs on its cluster.
func TestClusterSetNotBound(t *testing.T) {
	fvm := utiltesting.MakeFleetVM("team-a", "restricted").Obj()
	fvm.Spec.Placement.ClusterSets = []string{"restricted"}
	refused(t, alice.Create(t.Context(), fvm), fvm, "spec.placement.clusterSets[0]", `"restricted" is not bound to namespace team-a`, "ManagedClusterSetBinding")

	binding := &clusterv1beta2.ManagedClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "restricted"},
		Spec:       clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "restricted"},
	}
	forbidden(t, "alice binds the restricted set to team-a", alice.Create(t.Context(), binding))
	err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: argoNS, Name: "restricted"}, &clusterv1beta2.ManagedClusterSetBinding{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a binding of the restricted set in the Argo CD namespace: %v", err)
	}
	noVMsOn(t, "secure-a")
}

// TestMoveToAnUnboundSet: alice moves her VM toward secure-a, a cluster of
// the restricted set never bound to team-a: the move fails at once, saying
// the cluster does not qualify, and nothing runs there; she cannot move
// team-b's VMs, whose namespace she has no rights in; and her move cannot
// say it succeeded (the status is the hub's).
func TestMoveToAnUnboundSet(t *testing.T) {
	ctx := t.Context()
	fvm := utiltesting.MakeFleetVM("team-a", "mover").Obj()
	if err := alice.Create(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	remove(t, fvm)
	waitFVM(t, client.ObjectKeyFromObject(fvm), "placed on prod-a", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return slices.ContainsFunc(f.Status.Clusters, func(c fleetv1alpha1.ClusterStatus) bool { return c.Cluster == "prod-a" })
	})

	m := &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "to-secure"},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "mover", From: "prod-a", To: "secure-a"},
	}
	if err := alice.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), m) })
	got := &fleetv1alpha1.FleetVirtualMachineMove{}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(m), got)
		return err == nil && got.Status.Phase.Terminal(), err
	}); err != nil {
		t.Fatalf("the move never ended: %v (%s: %s)", err, got.Status.Phase, got.Status.Message)
	}
	if got.Status.Phase != fleetv1alpha1.MoveFailed || !strings.Contains(got.Status.Message, "cluster secure-a does not qualify") {
		t.Errorf("move %s: %q, want Failed: secure-a does not qualify", got.Status.Phase, got.Status.Message)
	}
	before := got.DeepCopy()
	got.Status.Phase, got.Status.Message = fleetv1alpha1.MoveSucceeded, "moved, says alice"
	forbidden(t, "alice writes her move's status", alice.Status().Patch(ctx, got, client.MergeFrom(before)))
	noVMsOn(t, "secure-a")

	other := &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "steal"},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "anything", From: "prod-a", To: "secure-a"},
	}
	forbidden(t, "alice moves a VM of team-b", alice.Create(ctx, other))
}

// TestSelectorReachingAnotherSet: alice's selector asks for the restricted
// set's cluster label while she lists the default set: the sets are the
// limit, so nothing qualifies, and the status says so.
func TestSelectorReachingAnotherSet(t *testing.T) {
	fvm := utiltesting.MakeFleetVM("team-a", "selector").Obj()
	fvm.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{clusterv1beta2.ClusterSetLabel: "restricted"}}
	if err := alice.Create(t.Context(), fvm); err != nil {
		t.Fatal(err)
	}
	remove(t, fvm)
	got := waitFVM(t, client.ObjectKeyFromObject(fvm), "not placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionPlaced)
		return c != nil && c.Status == metav1.ConditionFalse && f.Status.ObservedGeneration == f.Generation &&
			f.Status.Placement != nil && f.Status.Placement.Name != ""
	})
	if len(got.Status.Clusters) != 0 {
		t.Errorf("placed on %+v", got.Status.Clusters)
	}
	var p clusterv1beta1.Placement
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: argoNS, Name: got.Status.Placement.Name}, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.ClusterSets) != 1 || p.Spec.ClusterSets[0] != "default" {
		t.Errorf("Placement cluster sets %v, want [default]", p.Spec.ClusterSets)
	}
	noVMsOn(t, "secure-a")
}

// TestVMInAnotherNamespace: alice's template puts the VM in kube-system,
// or in team-b: refused, naming the field and the namespace it must be.
func TestVMInAnotherNamespace(t *testing.T) {
	for _, ns := range []string{"kube-system", "team-b"} {
		fvm := utiltesting.MakeFleetVM("team-a", "elsewhere-"+strings.ReplaceAll(ns, "-", "")).VMMetadata(map[string]any{"namespace": ns}).Obj()
		refused(t, alice.Create(t.Context(), fvm), fvm, "spec.template.metadata.namespace", "only into its own namespace (team-a)")
	}
}

// TestAnotherTenantsImage: alice's template clones straight from FleetVM's
// image namespace on the clusters, where team-b's images are imported:
// refused. She cannot create a FleetDiskImage in team-b either.
func TestAnotherTenantsImage(t *testing.T) {
	fvm := utiltesting.MakeFleetVM("team-a", "borrowed-image").VMSpec("dataVolumeTemplates", []any{map[string]any{
		"metadata": map[string]any{"name": "root"},
		"spec": map[string]any{
			"sourceRef": map[string]any{"kind": "DataSource", "namespace": "fleetvm-images", "name": "team-b.golden"},
			"storage":   map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}},
		},
	}}).Obj()
	refused(t, alice.Create(t.Context(), fvm), fvm, "spec.template.spec.dataVolumeTemplates[0].spec.sourceRef.namespace", "spec.diskImages")
	fdi := &fleetv1alpha1.FleetDiskImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "golden"},
		Spec: fleetv1alpha1.FleetDiskImageSpec{
			Source:  fleetv1alpha1.DiskImageSource{HTTP: &fleetv1alpha1.HTTPSource{URL: "https://images.example/golden.qcow2"}},
			Storage: fleetv1alpha1.DiskImageStorage{Size: resource.MustParse("10Gi")},
		},
	}
	forbidden(t, "alice creates a FleetDiskImage in team-b", alice.Create(t.Context(), fdi))
}

// TestOtherTenantsAndFleetVMsObjects: alice may not read bob's
// FleetVirtualMachines, write her own status (the hub's record of where the
// VM is), read or write the agents' reports, or touch Argo CD's
// ApplicationSets, Applications and AppProjects.
func TestOtherTenantsAndFleetVMsObjects(t *testing.T) {
	ctx := t.Context()
	mine := utiltesting.MakeFleetVM("team-a", "mine").Obj()
	if err := alice.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	remove(t, mine)
	theirs := utiltesting.MakeFleetVM("team-b", "theirs").Obj()
	if err := bob.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	remove(t, theirs)
	forbidden(t, "alice reads bob's FleetVirtualMachine", alice.Get(ctx, client.ObjectKeyFromObject(theirs), &fleetv1alpha1.FleetVirtualMachine{}))
	forbidden(t, "alice lists team-b", alice.List(ctx, &fleetv1alpha1.FleetVirtualMachineList{}, client.InNamespace("team-b")))

	got := waitFVM(t, client.ObjectKeyFromObject(mine), "reconciled", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.ObservedGeneration == f.Generation
	})
	got.Status.Clusters = append(got.Status.Clusters, fleetv1alpha1.ClusterStatus{Cluster: "secure-a", Phase: fleetv1alpha1.ClusterPhaseRunning})
	forbidden(t, "alice writes her FleetVirtualMachine's status", alice.Status().Update(ctx, got))

	forbidden(t, "alice lists the VM reports of prod-a", alice.List(ctx, &fleetv1alpha1.VMReportList{}, client.InNamespace("prod-a")))
	report := &fleetv1alpha1.VMReport{ObjectMeta: metav1.ObjectMeta{Namespace: "prod-a", Name: "team-a.mine"}}
	forbidden(t, "alice writes a VM report", alice.Create(ctx, report))

	for what, obj := range map[string]client.Object{
		"an ApplicationSet": &argov1alpha1.ApplicationSet{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: "alice"}},
		"an Application":    &argov1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: "alice"}},
		"an AppProject":     &argov1alpha1.AppProject{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: "alice"}},
	} {
		forbidden(t, "alice creates "+what+" in the Argo CD namespace", alice.Create(ctx, obj))
	}
}

// TestForgedReports: a VM in team-b on a spoke that carries team-a's
// FleetVM labels is not reported as team-a's; and an agent writes only its
// own cluster's namespace on the hub.
func TestForgedReports(t *testing.T) {
	ctx := t.Context()
	fvm := utiltesting.MakeFleetVM("team-a", "web").Obj()
	if err := alice.Create(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	remove(t, fvm)
	waitFVM(t, client.ObjectKeyFromObject(fvm), "running on prod-a", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.Summary.Ready == 1
	})
	spoke := fleet.Spoke("prod-a")
	if err := spoke.EnsureNamespace(ctx, "team-b"); err != nil {
		t.Fatal(err)
	}
	impostor := agenttest.VM("team-b", "impostor", agenttest.FleetVM("team-a", "web"))
	if err := spoke.Client.Create(ctx, impostor); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spoke.Client.Delete(ctx, impostor) })
	// The impostor triggers the agent; its report must still list only
	// team-a's VM. A later change of the real VM is the marker that the
	// agent has processed the impostor first (one worker, in order).
	var running kubevirtv1.VirtualMachine
	if err := spoke.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "web"}, &running); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"metadata":{"annotations":{"example.com/touched":"yes"}}}}}`))
	if err := spoke.Client.Patch(ctx, &running, patch); err != nil {
		t.Fatal(err)
	}
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		var r fleetv1alpha1.VMReport
		if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: "prod-a", Name: "team-a.web"}, &r); err != nil {
			return false, err
		}
		seen := false
		for _, vm := range r.Spec.VMs {
			if vm.Namespace != "team-a" {
				return false, fmt.Errorf("the report lists %s/%s", vm.Namespace, vm.Name)
			}
			// At or after the patch: delivery's self-heal may have
			// reverted it since, which is a newer generation still.
			seen = seen || vm.Generation >= running.Generation
		}
		return seen && len(r.Spec.VMs) == 1, nil
	})
	if err != nil {
		t.Errorf("team-a's report on prod-a: %v", err)
	}
	got := waitFVM(t, client.ObjectKeyFromObject(fvm), "status", func(*fleetv1alpha1.FleetVirtualMachine) bool { return true })
	if len(got.Status.Clusters) != 1 || got.Status.Clusters[0].Cluster != "prod-a" {
		t.Errorf("status clusters %+v", got.Status.Clusters)
	}

	// secure-a's agent, with its own identity, writes into prod-a's namespace.
	other, err := client.New(fleetVM.AgentHubConfig("secure-a"), client.Options{Scheme: fleet.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	forged := &fleetv1alpha1.VMReport{ObjectMeta: metav1.ObjectMeta{Namespace: "prod-a", Name: "team-a.web2"}}
	forbidden(t, "secure-a's agent writes a report in prod-a's namespace", other.Create(ctx, forged))
}

// TestHubIdentityCannotEscalate: whoever holds fleetvm-hub's ClusterRole
// (deploy/rbac/role.yaml) cannot turn it into more: write a Role that
// reads Secrets (the agent's Role name included), read Argo CD's
// cluster secrets, or write Argo CD Applications or AppProjects anywhere
// but Argo CD's namespace (where its Role is).
func TestHubIdentityCannotEscalate(t *testing.T) {
	ctx := t.Context()
	readSecrets := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}
	for _, ns := range []string{argoNS, "prod-a"} {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: addon.AgentHubRoleName + "-x"}, Rules: readSecrets}
		forbidden(t, "the hub's identity creates a Role reading Secrets in "+ns, hubUser.Create(ctx, role))
	}
	var agentRole rbacv1.Role
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: "prod-a", Name: addon.AgentHubRoleName}, &agentRole); err != nil {
		t.Fatal(err)
	}
	agentRole.Rules = append(agentRole.Rules, readSecrets...)
	forbidden(t, "the hub's identity adds Secrets to the agent's Role", hubUser.Update(ctx, &agentRole))
	forbidden(t, "the hub's identity lists Argo CD's secrets", hubUser.List(ctx, &corev1.SecretList{}, client.InNamespace(argoNS)))

	// Argo CD's objects: only in Argo CD's namespace. The same write there
	// is allowed (a dry run), so the refusals below are about the namespace.
	project := func(ns string) *argov1alpha1.AppProject {
		return &argov1alpha1.AppProject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hub-escalates"},
			Spec: argov1alpha1.AppProjectSpec{SourceRepos: []string{"*"}, Destinations: []argov1alpha1.ApplicationDestination{{Server: "*", Namespace: "*"}}}}
	}
	if err := hubUser.Create(ctx, project(argoNS), client.DryRunAll); err != nil {
		t.Fatalf("the hub's identity creates an AppProject in %s (dry run): %v", argoNS, err)
	}
	forbidden(t, "the hub's identity creates an AppProject in team-a", hubUser.Create(ctx, project("team-a")))
	app := &argov1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hub-escalates"},
		Spec: argov1alpha1.ApplicationSpec{Project: "default", Destination: argov1alpha1.ApplicationDestination{Server: "https://x", Namespace: "kube-system"},
			Source: &argov1alpha1.ApplicationSource{RepoURL: "https://example.com/x.git", Path: "."}}}
	forbidden(t, "the hub's identity creates an Application in team-a", hubUser.Create(ctx, app))
}

// noVMsOn fails if a VM of team-a is on the cluster.
func noVMsOn(t *testing.T, cluster string) {
	t.Helper()
	var vms kubevirtv1.VirtualMachineList
	if err := fleet.Spoke(cluster).Client.List(t.Context(), &vms, client.MatchingLabels{fleetv1alpha1.LabelFleetVMNamespace: "team-a"}); err != nil {
		t.Fatal(err)
	}
	if len(vms.Items) > 0 {
		t.Errorf("%d VMs of team-a on %s", len(vms.Items), cluster)
	}
}
