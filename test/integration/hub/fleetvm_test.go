package hub

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/hub"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

func rawExt(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

func isTrue(fvm *fleetv1alpha1.FleetVirtualMachine, cond string) bool {
	return meta.IsStatusConditionTrue(fvm.Status.Conditions, cond)
}

// TestPlacementByEnvironmentAndFit: an env=prod FleetVM lands only on prod
// clusters, and a cluster without room for a 32Gi VM is not chosen; the
// real OCM scheduler decides from the capacity scores.
func TestPlacementByEnvironmentAndFit(t *testing.T) {
	big, small := shape("4", "32Gi"), shape("1", "2Gi")
	publishScores(t, "prod-a", map[string]int32{big.Name(): 2, small.Name(): 40})
	publishScores(t, "prod-b", map[string]int32{big.Name(): 0, small.Name(): 10})
	publishScores(t, "dev-a", map[string]int32{big.Name(): 5, small.Name(): 50})

	bigVM := utiltesting.MakeFleetVM("placement", "big").VM(4, "32Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	smallVM := utiltesting.MakeFleetVM("placement", "small").VM(1, "2Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	createFVM(t, bigVM)
	createFVM(t, smallVM)

	got := waitFor(t, client.ObjectKeyFromObject(bigVM), "big VM placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return isTrue(f, fleetv1alpha1.ConditionPlaced)
	})
	if diff := cmp.Diff([]string{"prod-a"}, decided(got)); diff != "" {
		t.Errorf("32Gi VM decided clusters (-want,+got):\n%s", diff)
	}
	got = waitFor(t, client.ObjectKeyFromObject(smallVM), "small VM placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return isTrue(f, fleetv1alpha1.ConditionPlaced) && len(decided(f)) == 2
	})
	if diff := cmp.Diff([]string{"prod-a", "prod-b"}, decided(got)); diff != "" {
		t.Errorf("2Gi VM decided clusters (-want,+got):\n%s", diff)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionPlaced)
	if !strings.Contains(c.Message, "prod-a, prod-b") {
		t.Errorf("Placed message %q does not name the clusters", c.Message)
	}

	// Every cluster is told the shapes the fleet asks for, so its agent
	// scores them.
	shapesOf := func(listed func(names map[string]bool) bool) error {
		return fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
			var cm corev1.ConfigMap
			if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: "dev-a", Name: fleetv1alpha1.ShapesConfigMapName}, &cm); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			got, err := capacity.DecodeShapes(cm.Data[fleetv1alpha1.ShapesConfigMapKey])
			names := map[string]bool{}
			for _, s := range got {
				names[s.Name()] = true
			}
			return listed(names), err
		})
	}
	if err := shapesOf(func(names map[string]bool) bool { return names[big.Name()] && names[small.Name()] }); err != nil {
		t.Errorf("fleetvm-shapes ConfigMap of dev-a does not list the fleet's shapes: %v", err)
	}

	// No cluster fits a 64-core VM: Placed is False and says why.
	huge := utiltesting.MakeFleetVM("placement", "huge").VM(64, "512Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	createFVM(t, huge)
	got = waitFor(t, client.ObjectKeyFromObject(huge), "huge VM not placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionPlaced)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	c = meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionPlaced)
	if c.Reason != fleetv1alpha1.ReasonNoClusters || !strings.Contains(c.Message, "fleetvm-capacity") {
		t.Errorf("Placed = %s %q, want %s naming the capacity score", c.Reason, c.Message, fleetv1alpha1.ReasonNoClusters)
	}
	// Its shape is asked for while it exists, and no longer once it is
	// deleted; the others' stay.
	hugeShape := shape("64", "512Gi")
	if err := shapesOf(func(names map[string]bool) bool { return names[hugeShape.Name()] }); err != nil {
		t.Errorf("fleetvm-shapes ConfigMap of dev-a does not list the huge VM's shape: %v", err)
	}
	if err := fleet.Hub.Client.Delete(t.Context(), huge); err != nil {
		t.Fatal(err)
	}
	if err := shapesOf(func(names map[string]bool) bool {
		return !names[hugeShape.Name()] && names[big.Name()] && names[small.Name()]
	}); err != nil {
		t.Errorf("fleetvm-shapes ConfigMap of dev-a still lists the deleted VM's shape, or lost another's: %v", err)
	}

	// The real CRDs accepted every object FleetVM created: the Placement is
	// there with the fit predicate, the ApplicationSet and shared objects too.
	var p clusterv1beta1.Placement
	if err := fleet.Hub.Client.Get(t.Context(), placementKey(t, bigVM), &p); err != nil {
		t.Fatal(err)
	}
	cel := p.Spec.Predicates[0].RequiredClusterSelector.CelSelector.CelExpressions
	if len(cel) != 1 || !strings.Contains(cel[0], big.Name()) {
		t.Errorf("fit predicate = %q, want one naming %s", cel, big.Name())
	}
	// The reconcile that writes Placed goes on to write the ApplicationSet.
	var appSet argov1alpha1.ApplicationSet
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		return client.IgnoreNotFound(fleet.Hub.Client.Get(t.Context(), appSetKey(bigVM), &appSet)) == nil && appSet.Name != "", nil
	}); err != nil {
		t.Fatalf("ApplicationSet of %s: %v", bigVM.Name, err)
	}
	for _, obj := range []client.Object{&clusterv1beta1.Placement{}, gitOpsCluster()} {
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: argoNS, Name: "fleetvm-default"}, obj); err != nil {
			t.Errorf("shared %T fleetvm-default: %v", obj, err)
		}
	}
}

// TestApplicationsRenderedByArgoCD renders the ApplicationSets with Argo CD's
// own generator and template code and checks, per cluster, destination,
// source, overlay, labels and runStrategy.
func TestApplicationsRenderedByArgoCD(t *testing.T) {
	rhel := utiltesting.MakeFleetVM("render", "rhel9").VM(4, "16Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	// A cloud-init with template syntax must reach the cluster unchanged.
	rhel.Spec.Template = rawExt(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"example-rhel9","namespace":"render"},
"spec":{"running":true,"template":{"spec":{"domain":{"cpu":{"cores":4},"memory":{"guest":"16Gi"},"devices":{"disks":[{"name":"cloudinitdisk","disk":{"bus":"virtio"}}]}},
"volumes":[{"name":"cloudinitdisk","cloudInitNoCloud":{"userData":"#cloud-config\npassword: {{ $.Values.rhelRootPassword }}"}}]}}}}`)
	rhel.Spec.RunStrategy = fleetv1alpha1.RunStrategyHalted
	publishScores(t, "prod-a", map[string]int32{shape("4", "16Gi").Name(): 3})
	publishScores(t, "prod-b", map[string]int32{shape("4", "16Gi").Name(): 3})
	createFVM(t, rhel)
	waitFor(t, client.ObjectKeyFromObject(rhel), "placed on both prod clusters", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return len(decided(f)) == 2
	})
	apps := syncApps(t, rhel, 2)
	for _, cluster := range []string{"prod-a", "prod-b"} {
		app, ok := apps[cluster]
		if !ok {
			t.Fatalf("no Application for %s", cluster)
		}
		if app.Spec.Destination.Name != cluster || app.Spec.Destination.Namespace != "render" {
			t.Errorf("%s destination = %+v", cluster, app.Spec.Destination)
		}
		src := app.Spec.Source
		if src.RepoURL != hubConfig().Chart.RepoURL || src.Path != "deploy/charts/fleetvm-vm" || src.Helm == nil {
			t.Fatalf("%s source = %+v", cluster, src)
		}
		if !slices.Contains(src.Helm.Parameters, argov1alpha1.HelmParameter{Name: "cluster", Value: cluster}) {
			t.Errorf("%s helm parameters = %+v, want cluster=%s", cluster, src.Helm.Parameters, cluster)
		}
		var values struct {
			VM struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
				Spec     map[string]any    `json:"spec"`
			} `json:"vm"`
		}
		if err := json.Unmarshal(src.Helm.ValuesObject.Raw, &values); err != nil {
			t.Fatal(err)
		}
		vm := values.VM
		if vm.Metadata.Name != "example-rhel9" || vm.Metadata.Labels[fleetv1alpha1.LabelFleetVMName] != "rhel9" ||
			vm.Metadata.Labels[fleetv1alpha1.LabelFleetVMNamespace] != "render" {
			t.Errorf("%s VM metadata = %+v", cluster, vm.Metadata)
		}
		if vm.Spec["runStrategy"] != "Halted" || vm.Spec["running"] != nil {
			t.Errorf("%s VM runStrategy=%v running=%v, want Halted and no running", cluster, vm.Spec["runStrategy"], vm.Spec["running"])
		}
		b, _ := json.Marshal(vm.Spec)
		if !strings.Contains(string(b), `password: {{ $.Values.rhelRootPassword }}`) {
			t.Errorf("%s cloud-init was altered by templating: %s", cluster, b)
		}
		// Argo CD does not create the namespace (its project allows nothing
		// cluster-scoped): FleetVM does, through OCM, and Argo CD retries
		// a first sync that finds it missing.
		if app.Labels[fleetv1alpha1.LabelCluster] != cluster || app.Spec.SyncPolicy.Automated == nil ||
			slices.Contains(app.Spec.SyncPolicy.SyncOptions, "CreateNamespace=true") ||
			app.Spec.SyncPolicy.Retry == nil || app.Spec.SyncPolicy.Retry.Limit >= 0 {
			t.Errorf("%s labels %v sync policy %+v", cluster, app.Labels, app.Spec.SyncPolicy)
		}
		if app.Spec.Project != "fleetvm-render" {
			t.Errorf("%s project %q, want the namespace's own fleetvm-render", cluster, app.Spec.Project)
		}
		var work workv1.ManifestWork
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: cluster, Name: "fleetvm-namespace-render"}, &work); err != nil {
			t.Errorf("%s: no ManifestWork creating namespace render: %v", cluster, err)
		} else {
			// The namespace first, then the team's ServiceAccount, Role and
			// RoleBinding Argo CD syncs as; removing the work leaves the
			// namespace (the VMs live there) and removes the rest.
			var kinds []string
			for _, m := range work.Spec.Workload.Manifests {
				var obj struct {
					Kind     string `json:"kind"`
					Metadata struct {
						Name, Namespace string
					} `json:"metadata"`
				}
				if err := json.Unmarshal(m.Raw, &obj); err != nil {
					t.Fatal(err)
				}
				kinds = append(kinds, obj.Kind+" "+obj.Metadata.Namespace+"/"+obj.Metadata.Name)
			}
			wantKinds := []string{"Namespace /render", "ServiceAccount render/fleetvm-tenant", "Role render/fleetvm-tenant", "RoleBinding render/fleetvm-tenant"}
			if !slices.Equal(kinds, wantKinds) {
				t.Errorf("%s: namespace ManifestWork holds %v, want %v", cluster, kinds, wantKinds)
			}
			if d := work.Spec.DeleteOption; d == nil || d.PropagationPolicy != workv1.DeletePropagationPolicyTypeSelectivelyOrphan ||
				d.SelectivelyOrphan == nil || !slices.Contains(d.SelectivelyOrphan.OrphaningRules, workv1.OrphaningRule{Resource: "namespaces", Name: "render"}) {
				t.Errorf("%s: namespace ManifestWork delete option %+v: removing it must leave namespace render", cluster, d)
			}
		}
		if slices.Contains(app.Finalizers, argov1alpha1.ResourcesFinalizerName) {
			t.Errorf("%s Application carries the resources finalizer from the template: deleting it by accident would delete the VM", cluster)
		}
	}

	// The namespace's project confines the Applications to it: only the
	// allowed kinds, nothing cluster-scoped.
	var proj argov1alpha1.AppProject
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: argoNS, Name: "fleetvm-render"}, &proj); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]argov1alpha1.ApplicationDestination{{Server: "*", Name: "*", Namespace: "render"}}, proj.Spec.Destinations); diff != "" {
		t.Errorf("project destinations (-want,+got):\n%s", diff)
	}
	if len(proj.Spec.ClusterResourceWhitelist) != 0 || !proj.IsGroupKindPermitted(schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachine"}, true) ||
		proj.IsGroupKindPermitted(schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}, true) {
		t.Errorf("project resources: cluster %v, namespaced %v", proj.Spec.ClusterResourceWhitelist, proj.Spec.NamespaceResourceWhitelist)
	}

	// A git source picks the overlay by each cluster's env label.
	git := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "render", Name: "demo"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.fleet.invalid/vms.git", Path: "demo-vm/kustomize/overlays/{{environment}}", TargetRevision: "main"},
			Placement: fleetv1alpha1.FleetPlacement{ClusterSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"region": "east"},
			}},
			RunStrategy:    fleetv1alpha1.RunStrategyAlways,
			DeletionPolicy: fleetv1alpha1.DeletionPolicyOrphan,
		},
	}
	createFVM(t, git)
	waitFor(t, client.ObjectKeyFromObject(git), "git source placed on the east clusters", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return len(decided(f)) == 2
	})
	apps = syncApps(t, git, 2)
	for cluster, env := range map[string]string{"prod-a": "prod", "dev-a": "dev"} {
		app := apps[cluster]
		src := app.Spec.Source
		if src == nil || src.Path != "demo-vm/kustomize/overlays/"+env || src.TargetRevision != "main" || src.Kustomize == nil {
			t.Fatalf("%s source = %+v, want overlay %s", cluster, src, env)
		}
		if src.Kustomize.CommonLabels[fleetv1alpha1.LabelCluster] != cluster || src.Kustomize.CommonLabels[fleetv1alpha1.LabelFleetVMName] != "demo" {
			t.Errorf("%s kustomize labels = %v", cluster, src.Kustomize.CommonLabels)
		}
		if len(src.Kustomize.Patches) != 1 || !strings.Contains(src.Kustomize.Patches[0].Patch, "runStrategy: Always") {
			t.Errorf("%s runStrategy patch = %+v", cluster, src.Kustomize.Patches)
		}
	}
}

// syncApps runs Argo CD's ApplicationSet code for the FleetVM until it
// yields want Applications, and returns them by cluster.
func syncApps(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine, want int) map[string]argov1alpha1.Application {
	t.Helper()
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		apps, err := argo.Sync(t.Context(), appSetKey(fvm))
		return len(apps) == want, err
	})
	if err != nil {
		t.Fatalf("Applications of %s: %v", fvm.Name, err)
	}
	return applications(t, fvm)
}

// TestFlapSafety: a decision flap shorter than the grace period deletes
// nothing; a longer one removes exactly that cluster's Application.
// fleetvm-hub runs on a fake clock, so the short flap is short however
// slow the machine, and only the clock's step ends the long one's grace
// period.
func TestFlapSafety(t *testing.T) {
	ctx := t.Context()
	clk := onFakeClock(t)
	s := shape("2", "4Gi")
	for _, c := range []string{"prod-a", "prod-b"} {
		publishScores(t, c, map[string]int32{s.Name(): 10})
	}
	fvm := utiltesting.MakeFleetVM("flap", "web").VM(2, "4Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	createFVM(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	waitFor(t, key, "placed on both prod clusters", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) == 2 })
	before := syncApps(t, fvm, 2)

	setEnv := func(cluster, env string) {
		t.Helper()
		ctx := context.WithoutCancel(ctx) // also from t.Cleanup
		var mc clusterv1.ManagedCluster
		if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Name: cluster}, &mc); err != nil {
			t.Fatal(err)
		}
		mc.Labels["env"] = env
		if err := fleet.Hub.Client.Update(ctx, &mc); err != nil {
			t.Fatal(err)
		}
	}
	leaving := func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		for _, c := range f.Status.Clusters {
			if c.Cluster == "prod-b" {
				return c.Phase == fleetv1alpha1.ClusterPhaseLeaving
			}
		}
		return false
	}

	// Short flap: prod-b leaves the decision, then comes back.
	setEnv("prod-b", "staging")
	waitFor(t, key, "prod-b leaving", leaving)
	setEnv("prod-b", "prod")
	waitFor(t, key, "prod-b back", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) == 2 && !leaving(f) })
	after := applications(t, fvm)
	for c, app := range before {
		if a, ok := after[c]; !ok || a.UID != app.UID || a.DeletionTimestamp != nil {
			t.Errorf("short flap touched the Application of %s", c)
		}
	}

	// Long flap: prod-b stays out past the grace period.
	setEnv("prod-b", "staging")
	t.Cleanup(func() { setEnv("prod-b", "prod") })
	waitFor(t, key, "prod-b leaving again", leaving)
	clk.Step(gracePeriod + time.Second)
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		app := after["prod-b"]
		var got argov1alpha1.Application
		err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(&app), &got)
		return err == nil && got.DeletionTimestamp != nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("prod-b's Application not removed after the grace period: %v", err)
	}
	var got argov1alpha1.Application
	app := after["prod-b"]
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(&app), &got); err == nil &&
		!slices.Contains(got.Finalizers, argov1alpha1.ResourcesFinalizerName) {
		t.Errorf("prod-b's Application deleted without the resources finalizer: its VM would stay")
	}
	a := applications(t, fvm)["prod-a"]
	if a.DeletionTimestamp != nil || a.UID != before["prod-a"].UID {
		t.Errorf("prod-a's Application was touched by prod-b leaving")
	}
	finishArgoDeletion(t, fvm)
}

// finishArgoDeletion does what Argo CD's application controller does once
// it has deleted an Application's resources: drop the resources finalizer.
func finishArgoDeletion(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	for _, app := range applications(t, fvm) {
		if app.DeletionTimestamp == nil {
			continue
		}
		patch := client.MergeFrom(app.DeepCopy())
		app.Finalizers = nil
		if err := fleet.Hub.Client.Patch(t.Context(), &app, patch); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// TestDeletion: Delete removes the VMs through Argo CD's resources
// finalizer; Orphan leaves them (no finalizer); the hub objects go.
func TestDeletion(t *testing.T) {
	ctx := t.Context()
	for _, policy := range []fleetv1alpha1.DeletionPolicy{fleetv1alpha1.DeletionPolicyDelete, fleetv1alpha1.DeletionPolicyOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			s := shape("1", "1Gi")
			publishScores(t, "prod-a", map[string]int32{s.Name(): 10})
			publishScores(t, "prod-b", map[string]int32{s.Name(): 10})
			fvm := utiltesting.MakeFleetVM("deletion", strings.ToLower(string(policy))).VM(1, "1Gi").VMRunning().DeletionPolicy(policy).Obj()
			createFVM(t, fvm)
			key := client.ObjectKeyFromObject(fvm)
			waitFor(t, key, "placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) == 2 })
			apps := syncApps(t, fvm, 2)
			placement := placementKey(t, fvm)

			if err := fleet.Hub.Client.Delete(ctx, fvm); err != nil {
				t.Fatal(err)
			}
			err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
				err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &argov1alpha1.ApplicationSet{})
				if !apierrors.IsNotFound(err) {
					return false, client.IgnoreNotFound(err)
				}
				// The ApplicationSet is gone; every Application is being
				// deleted (or gone), none garbage-collected behind our back.
				for c, app := range apps {
					var got argov1alpha1.Application
					err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(&app), &got)
					if apierrors.IsNotFound(err) {
						if policy == fleetv1alpha1.DeletionPolicyDelete {
							return false, errorf("Application of %s vanished without the resources finalizer", c)
						}
						continue
					}
					if err != nil || got.DeletionTimestamp == nil {
						return false, err
					}
					hasFinalizer := slices.Contains(got.Finalizers, argov1alpha1.ResourcesFinalizerName)
					if hasFinalizer != (policy == fleetv1alpha1.DeletionPolicyDelete) {
						return false, errorf("Application of %s: resources finalizer %v with policy %s", c, hasFinalizer, policy)
					}
					// The hub wrote the owner and the finalizer as merge
					// patches of its view of an Application (argoapp):
					// what that view leaves out stays as Argo CD wrote it.
					if !equality.Semantic.DeepEqual(got.Spec, app.Spec) || !equality.Semantic.DeepEqual(got.Status, app.Status) {
						return false, errorf("Application of %s: the hub's writes changed its spec or status (-before,+after):\n%s%s", c,
							cmp.Diff(app.Spec, got.Spec), cmp.Diff(app.Status, got.Status))
					}
				}
				return true, nil
			})
			if err != nil {
				t.Fatalf("deleting: %v", err)
			}
			if policy == fleetv1alpha1.DeletionPolicyDelete {
				// Until Argo CD has removed the VMs, the FleetVM stays.
				if err := fleet.Hub.Client.Get(ctx, key, &fleetv1alpha1.FleetVirtualMachine{}); err != nil {
					t.Fatalf("FleetVM gone before its VMs: %v", err)
				}
				finishArgoDeletion(t, fvm)
			}
			err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
				errF := fleet.Hub.Client.Get(ctx, key, &fleetv1alpha1.FleetVirtualMachine{})
				if !apierrors.IsNotFound(errF) {
					return false, client.IgnoreNotFound(errF)
				}
				return placementReleased(ctx, placement)
			})
			if err != nil {
				t.Fatalf("FleetVM and Placement not gone: %v", err)
			}
		})
	}
}

// TestRestartAndRecreate: a child deleted by hand is recreated, and a
// controller restart mid-way converges with no duplicate objects.
func TestRestartAndRecreate(t *testing.T) {
	ctx := t.Context()
	s := shape("1", "2Gi")
	publishScores(t, "prod-a", map[string]int32{s.Name(): 10})
	publishScores(t, "prod-b", map[string]int32{s.Name(): 10})
	fvm := utiltesting.MakeFleetVM("restart", "db").VM(1, "2Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	createFVM(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	waitFor(t, key, "placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) == 2 })
	apps := syncApps(t, fvm, 2)

	// The ApplicationSet deleted by hand: its Applications survive (no VM
	// is deleted by accident) and it comes back.
	var appSet argov1alpha1.ApplicationSet
	if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &appSet); err != nil {
		t.Fatal(err)
	}
	stopHub()
	if err := fleet.Hub.Client.Delete(ctx, &appSet); err != nil {
		t.Fatal(err)
	}
	if err := startHub(context.Background()); err != nil { // outlives this test
		t.Fatal(err)
	}
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		var got argov1alpha1.ApplicationSet
		if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return got.UID != appSet.UID && got.DeletionTimestamp == nil, nil
	})
	if err != nil {
		t.Fatalf("ApplicationSet not recreated: %v", err)
	}
	err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
		now := applications(t, fvm)
		for c, app := range apps {
			got, ok := now[c]
			if !ok || got.UID != app.UID || got.DeletionTimestamp != nil {
				return false, errorf("Application of %s lost", c)
			}
			if ref := metav1.GetControllerOf(&got); ref == nil || ref.UID == appSet.UID {
				return false, nil // not adopted yet
			}
			// The hub caches a trimmed Application (no spec) and patches
			// only what it changed: the spec is intact.
			if !equality.Semantic.DeepEqual(got.Spec, app.Spec) {
				return false, errorf("Application of %s: the adoption changed its spec", c)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("Applications after the ApplicationSet was recreated: %v", err)
	}

	// The Placement deleted by hand comes back.
	var p clusterv1beta1.Placement
	placement := placementKey(t, fvm)
	if err := fleet.Hub.Client.Get(ctx, placement, &p); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Delete(ctx, &p); err != nil {
		t.Fatal(err)
	}
	err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
		var got clusterv1beta1.Placement
		err := fleet.Hub.Client.Get(ctx, placement, &got)
		return err == nil && got.UID != p.UID, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("Placement not recreated: %v", err)
	}

	// Exactly one Placement and one ApplicationSet for the FleetVM.
	labels := client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace}
	var as argov1alpha1.ApplicationSetList
	if err := fleet.Hub.Client.List(ctx, &as, client.InNamespace(argoNS), labels); err != nil {
		t.Fatal(err)
	}
	latest := waitFor(t, key, "read", func(*fleetv1alpha1.FleetVirtualMachine) bool { return true })
	if ps := fleetrun.Placements(t, fleet.Hub.Client, argoNS, latest); len(ps) != 1 || len(as.Items) != 1 {
		t.Errorf("after restart: Placements %v and %d ApplicationSets, want 1 and 1", ps, len(as.Items))
	}
}

// TestNoOpReconcileWritesNothing counts the writes of a reconcile that finds
// everything in place: zero.
func TestNoOpReconcileWritesNothing(t *testing.T) {
	ctx := t.Context()
	s := shape("1", "3Gi")
	publishScores(t, "prod-a", map[string]int32{s.Name(): 10})
	publishScores(t, "prod-b", map[string]int32{s.Name(): 10})
	fvm := utiltesting.MakeFleetVM("noop", "cache").VM(1, "3Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	// Applied as kubectl apply does: the hub's cache drops the applied
	// configuration, and its writes (the finalizer, the status) must not.
	applied, err := json.Marshal(fvm)
	if err != nil {
		t.Fatal(err)
	}
	fvm.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: string(applied), "example.com/owner": "team-a"}
	wantAnnotations := maps.Clone(fvm.Annotations)
	createFVM(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	waitFor(t, key, "placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) == 2 })
	syncApps(t, fvm, 2)
	waitFor(t, key, "delivered", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return isTrue(f, fleetv1alpha1.ConditionDelivered) })

	var writes, reads atomic.Int32
	count := func() { writes.Add(1) }
	// Reads go through a cache with the controller's indexes and the
	// hub's transforms (trimmed Applications and ApplicationSets), as in
	// fleetvm-hub; writes go to the API server and are counted, and so are
	// the reads that pass the cache.
	opts := hub.CacheOptions(fleet.Hub.Config, argoNS)
	opts.Scheme = hub.Scheme()
	reader, err := cache.New(fleet.Hub.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	uncached, err := client.NewWithWatch(fleet.Hub.Config, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	apiReader := interceptor.NewClient(uncached, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			reads.Add(1)
			return c.Get(ctx, key, o, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			reads.Add(1)
			return c.List(ctx, list, opts...)
		},
	})
	if err := fleetvirtualmachine.SetupIndexes(ctx, reader); err != nil {
		t.Fatal(err)
	}
	go func() { _ = reader.Start(ctx) }()
	if !reader.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	direct, err := client.NewWithWatch(fleet.Hub.Config, client.Options{Scheme: hub.Scheme(), Cache: &client.CacheOptions{Reader: reader, Unstructured: true}})
	if err != nil {
		t.Fatal(err)
	}
	counting := interceptor.NewClient(direct, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			count()
			return c.Update(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			count()
			return c.Patch(ctx, o, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, o, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
			count()
			return c.SubResource(sub).Update(ctx, o, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			count()
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
	})
	r := &fleetvirtualmachine.Reconciler{
		Client: counting, APIReader: apiReader, Recorder: record.NewFakeRecorder(1 << 16), Clock: clock.RealClock{}, Config: hubConfig(),
	}
	// The running hub may still be settling: reconcile until a pass writes
	// nothing, then check the next two write nothing either.
	err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
		writes.Store(0)
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		return writes.Load() == 0, err
	})
	if err != nil {
		t.Fatalf("reconcile never settled: %v", err)
	}
	writes.Store(0)
	reads.Store(0)
	for range 2 {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("no-op reconciles issued %d writes, want 0", n)
	}
	// The cached ApplicationSet keeps only its spec's digest: the one
	// FleetVM wrote must pass for what it renders without a read.
	if n := reads.Load(); n != 0 {
		t.Errorf("no-op reconciles read the API server %d times past the cache, want 0", n)
	}
	// Which found the Applications and the FleetVM's VM through indexes
	// stored once, for the Lists the hub makes (fieldindex): a List of the
	// other kind finds nothing.
	now := &fleetv1alpha1.FleetVirtualMachine{}
	if err := reader.Get(ctx, key, now); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"example.com/owner": "team-a"}, now.Annotations); diff != "" {
		t.Errorf("cached FleetVirtualMachine's annotations (-want,+got):\n%s", diff)
	}
	stored := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(ctx, key, stored); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantAnnotations, stored.Annotations); diff != "" || !slices.Contains(stored.Finalizers, fleetv1alpha1.FleetVirtualMachineFinalizer) {
		t.Errorf("stored FleetVirtualMachine: finalizers %v, annotations (-want,+got):\n%s", stored.Finalizers, diff)
	}
	vm, _ := vmclaim.Key(now)
	indexedOnce(t, reader, &argoapp.ApplicationList{}, fleetvirtualmachine.IndexOwner, key.String(), argoNS, false)
	indexedOnce(t, reader, &fleetv1alpha1.FleetVirtualMachineList{}, fleetvirtualmachine.IndexStatusCluster, now.Status.Clusters[0].Cluster, key.Namespace, true)
	// Its VM is of its name: the index by VM holds no set for it, and its
	// claim on the VM is read by name.
	var byVM fleetv1alpha1.FleetVirtualMachineList
	if err := reader.List(ctx, &byVM, client.MatchingFields{vmclaim.IndexVM: vm}); err != nil || len(byVM.Items) != 0 {
		t.Errorf("index %s=%s: %d found (%v), want none: a VM of its FleetVM's name is not indexed", vmclaim.IndexVM, vm, len(byVM.Items), err)
	}
	if claimants, err := vmclaim.ClaimantsOf(ctx, reader, vm); err != nil || len(claimants) != 1 || claimants[0].UID != now.UID {
		t.Errorf("claimants of VM %s: %d (%v), want %s alone", vm, len(claimants), err, key)
	}
}

// indexedOnce fails unless the cache's index by field finds objects with
// value in Lists across namespaces (acrossNamespaces) or in namespace ns,
// and none in Lists of the other kind.
func indexedOnce(t *testing.T, c cache.Cache, list client.ObjectList, field, value, ns string, acrossNamespaces bool) {
	t.Helper()
	count := func(opts ...client.ListOption) int {
		if err := c.List(t.Context(), list, append(opts, client.MatchingFields{field: value})...); err != nil {
			t.Fatal(err)
		}
		return meta.LenList(list)
	}
	across, in := count(), count(client.InNamespace(ns))
	if acrossNamespaces && (across == 0 || in != 0) || !acrossNamespaces && (in == 0 || across != 0) {
		t.Errorf("index %s=%s: %d found across namespaces, %d in %s; want them only %s", field, value, across, in, ns,
			map[bool]string{true: "across namespaces", false: "in " + ns}[acrossNamespaces])
	}
}

// TestEditedApplicationSetIsRestored: the hub's cache keeps an
// ApplicationSet without its spec, only a digest of it
// (delivery.TrimApplicationSet). An edit of the spec by hand is still seen
// and undone, and a change of the FleetVM's VM still reaches it.
func TestEditedApplicationSetIsRestored(t *testing.T) {
	ctx := t.Context()
	s := shape("1", "5Gi")
	publishScores(t, "prod-a", map[string]int32{s.Name(): 10})
	publishScores(t, "prod-b", map[string]int32{s.Name(): 10})
	fvm := utiltesting.MakeFleetVM("edited", "web").VM(1, "5Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	createFVM(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	waitFor(t, key, "placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) == 2 })
	var written argov1alpha1.ApplicationSet
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		return client.IgnoreNotFound(fleet.Hub.Client.Get(ctx, appSetKey(fvm), &written)) == nil && written.Name != "", nil
	})
	if err != nil {
		t.Fatalf("no ApplicationSet: %v", err)
	}
	release := written.Spec.Template.Spec.Source.Helm.ReleaseName

	edit := &argov1alpha1.ApplicationSet{ObjectMeta: metav1.ObjectMeta{Namespace: written.Namespace, Name: written.Name}}
	// The template, then, alone, the sync policy that keeps a VM when
	// its Application goes.
	for _, step := range []struct{ what, patch string }{
		{"template", `{"spec":{"template":{"spec":{"source":{"helm":{"releaseName":"edited-by-hand"}}}}}}`},
		{"sync policy", `{"spec":{"syncPolicy":{"preserveResourcesOnDeletion":false}}}`},
	} {
		if err := fleet.Hub.Client.Patch(ctx, edit, client.RawPatch(types.MergePatchType, []byte(step.patch))); err != nil {
			t.Fatal(err)
		}
		err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
			var got argov1alpha1.ApplicationSet
			if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &got); err != nil {
				return false, err
			}
			return got.ResourceVersion != edit.ResourceVersion && got.Spec.Template.Spec.Source.Helm.ReleaseName == release &&
				got.Spec.SyncPolicy != nil && got.Spec.SyncPolicy.PreserveResourcesOnDeletion, nil
		})
		if err != nil {
			t.Fatalf("the %s edited by hand was not restored: %v", step.what, err)
		}
	}

	mergePatch(t, key, `{"spec":{"runStrategy":"Halted"}}`)
	err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
		var got argov1alpha1.ApplicationSet
		if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &got); err != nil {
			return false, err
		}
		return strings.Contains(string(got.Spec.Template.Spec.Source.Helm.ValuesObject.Raw), `"Halted"`), nil
	})
	if err != nil {
		t.Fatalf("the FleetVM's change did not reach its ApplicationSet: %v", err)
	}
}
