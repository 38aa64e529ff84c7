package e2e

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/localfleet"
)

// The specs run on the local fleet: real API servers, the real OCM
// scheduler, real Argo CD, fleetvm-hub, the agents and the KubeVirt
// simulator (see test/localfleet).

const timeout = 3 * time.Minute

var (
	fleet   *localfleet.Fleet
	logDir  string
	started time.Duration
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrl.SetLogger(logr.Discard())
	// The OCM scheduler's retried conflicts would bury test failures.
	klog.SetLogger(logr.Discard())
	var err error
	if logDir, err = os.MkdirTemp("", "fleetvm-e2e-logs-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	begin := time.Now()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fleet, err = localfleet.Start(context.Background(), localfleet.Options{
		SimulatorStepDelay: 100 * time.Millisecond,
		LogDir:             logDir,
		Progress:           os.Stderr,
		GitRepos: map[string]string{
			escapeRepo: filepath.Join(root, "test", "testdata", "git", "escape"),
			cloneRepo:  filepath.Join(root, "test", "testdata", "git", "clone"),
			reachRepo:  filepath.Join(root, "test", "testdata", "git", "reach"),
		},
		GitHistories: map[string][]string{
			rolloutRepo: {
				filepath.Join(root, "test", "testdata", "git", "rollout", "v1"),
				filepath.Join(root, "test", "testdata", "git", "rollout", "v2"),
			},
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the local fleet: %v\nArgo CD logs: %s\n", err, logDir)
		return 1
	}
	started = time.Since(begin)
	code := m.Run()
	if err := fleet.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the local fleet:", err)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(logDir)
	} else {
		fmt.Fprintf(os.Stderr, "Argo CD logs kept in %s\n", logDir)
	}
	return code
}

func spokes() map[string]client.Client {
	out := map[string]client.Client{}
	for _, s := range fleet.Spokes {
		out[s.Name] = s.Client
	}
	return out
}

// checkArgoCD fails the test when an Argo CD component died.
func checkArgoCD(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		if err := fleet.Check(); err != nil {
			t.Errorf("Argo CD: %v (logs in %s)", err, logDir)
		}
	})
}

func TestLifecycle(t *testing.T) {
	checkArgoCD(t)
	t.Logf("local fleet started in %s", started.Round(time.Second))
	LifecycleSpec(t, LifecycleInput{
		Hub:           fleet.Hub.Client,
		Spokes:        spokes(),
		ArgoNamespace: localfleet.ArgoNamespace,
		Namespace:     "e2e",
		Environment:   "prod",
		Clusters:      2,
		Timeout:       timeout,
	})
}

// TestMove moves a VM between the two prod clusters with real Argo CD.
func TestMove(t *testing.T) {
	checkArgoCD(t)
	MoveSpec(t, LifecycleInput{
		Hub:           fleet.Hub.Client,
		Spokes:        spokes(),
		ArgoNamespace: localfleet.ArgoNamespace,
		Namespace:     "e2e-move",
		Environment:   "prod",
		Timeout:       timeout,
	})
}

// TestMoveCold moves a VM with a data disk of its own between the two
// prod clusters with real Argo CD, its data carried.
func TestMoveCold(t *testing.T) {
	checkArgoCD(t)
	ColdMoveSpec(t, LifecycleInput{
		Hub:           fleet.Hub.Client,
		Spokes:        spokes(),
		ArgoNamespace: localfleet.ArgoNamespace,
		Namespace:     "e2e-move-cold",
		Environment:   "prod",
		Timeout:       timeout,
	})
}

// TestMoveLive live-migrates a VM with a data disk of its own between the
// two prod clusters with real Argo CD, its data carried.
func TestMoveLive(t *testing.T) {
	checkArgoCD(t)
	LiveMoveSpec(t, LifecycleInput{
		Hub:           fleet.Hub.Client,
		Spokes:        spokes(),
		ArgoNamespace: localfleet.ArgoNamespace,
		Namespace:     "e2e-move-live",
		Environment:   "prod",
		Timeout:       timeout,
	})
}

// TestRollout rolls a memory change over the two prod clusters, one at a
// time, with real Argo CD.
func TestRollout(t *testing.T) {
	checkArgoCD(t)
	RolloutSpec(t, LifecycleInput{
		Hub:           fleet.Hub.Client,
		Spokes:        spokes(),
		ArgoNamespace: localfleet.ArgoNamespace,
		Namespace:     "e2e-rollout",
		Environment:   "prod",
		Timeout:       timeout,
	})
}

// TestRolloutStrategies runs All, ProgressivePerGroup, a failed change,
// undo and abort over the two prod clusters with real Argo CD.
func TestRolloutStrategies(t *testing.T) {
	checkArgoCD(t)
	RolloutStrategiesSpec(t, LifecycleInput{
		Hub:           fleet.Hub.Client,
		Spokes:        spokes(),
		ArgoNamespace: localfleet.ArgoNamespace,
		Namespace:     "e2e-rollout-strategies",
		Environment:   "prod",
		Timeout:       timeout,
	})
}

// TestRolloutGitSource rolls a git source from one tag to the next over
// the two prod clusters, one at a time, and back, with real Argo CD.
func TestRolloutGitSource(t *testing.T) {
	checkArgoCD(t)
	RolloutGitSpec(t, LifecycleInput{
		Hub:           fleet.Hub.Client,
		Spokes:        spokes(),
		ArgoNamespace: localfleet.ArgoNamespace,
		Namespace:     "e2e-rollout-git",
		Environment:   "prod",
		Timeout:       timeout,
	}, fleet.GitRepoURLs[rolloutRepo])
}

// TestExamples applies examples/ as `make run` does and waits for all of
// them to be Ready; the git example must pick each cluster's overlay.
func TestExamples(t *testing.T) {
	checkArgoCD(t)
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	examples, err := localfleet.LoadExamples(root + "/examples")
	if err != nil {
		t.Fatal(err)
	}
	for _, fvm := range examples {
		if fvm.Spec.Source != nil {
			// make run serves examples/git on a fixed port; here the fleet
			// picked a free one.
			fvm.Spec.Source.RepoURL = fleet.GitRepoURL
		}
	}
	want := map[string]int{ // clusters per example, as examples/README.md says
		"example-rhel9": 2, "example-windows10": 1, "example-server2019": 2, "example-fedora": 1,
	}
	got := ExamplesSpec(t, ExamplesInput{Hub: fleet.Hub.Client, Examples: examples, Clusters: want, Timeout: timeout})

	// The Windows VMs are on VLAN 2003: only nodes with its bridge can
	// start them, and prod-b has none.
	bridgeNodes := map[string]bool{}
	for _, c := range localfleet.DefaultClusters() {
		for _, n := range c.Nodes {
			if _, ok := n.Extended[localfleet.BridgeResource(localfleet.Vlan2003.Bridge)]; ok {
				bridgeNodes[n.Name] = true
			}
		}
	}
	for _, fvm := range got {
		if n := len(fvm.Status.Clusters); n != want[fvm.Name] {
			t.Errorf("%s on %d clusters, want %d", fvm.Name, n, want[fvm.Name])
		}
		if fvm.Name == "example-rhel9" || fvm.Name == "example-fedora" {
			continue
		}
		for _, c := range fvm.Status.Clusters {
			if !bridgeNodes[c.Node] {
				t.Errorf("%s runs on %s node %q, which has no bridge2003", fvm.Name, c.Cluster, c.Node)
			}
		}
		if fvm.Name != "example-server2019" {
			continue
		}
		// It asks for every cluster: the status says why prod-b is left out.
		wantExcluded := []fleetv1alpha1.ExclusionCount{{Reason: "MissingNetwork", Count: 1, Clusters: []string{"prod-b"},
			Detail: "network default/vlan2003 is on no node (no NetworkAttachmentDefinition, or no node has its resource)"}}
		fleetrun.WaitFVM(t, fleet.Hub.Client, client.ObjectKeyFromObject(fvm), timeout, "Server 2019 says why prod-b is left out",
			func(f *fleetv1alpha1.FleetVirtualMachine) bool {
				return f.Status.Placement != nil && equality.Semantic.DeepEqual(f.Status.Placement.Excluded, wantExcluded)
			})
		// The dev overlay halves the cores; prod keeps the base's 8.
		for _, c := range fvm.Status.Clusters {
			vm := &kubevirtv1.VirtualMachine{}
			if err := fleet.Spoke(c.Cluster).Client.Get(t.Context(), client.ObjectKey{Namespace: fvm.Namespace, Name: fvm.Name}, vm); err != nil {
				t.Fatal(err)
			}
			cores := vm.Spec.Template.Spec.Domain.CPU.Cores
			if wantCores := map[string]uint32{"prod": 8, "dev": 4}[c.Environment]; cores != wantCores {
				t.Errorf("Server 2019 on %s (%s): %d cores, want %d from the %s overlay", c.Cluster, c.Environment, cores, wantCores, c.Environment)
			}
			if vm.Labels[fleetv1alpha1.LabelCluster] != c.Cluster {
				t.Errorf("Server 2019 on %s: label %s=%q", c.Cluster, fleetv1alpha1.LabelCluster, vm.Labels[fleetv1alpha1.LabelCluster])
			}
		}
	}
}

// Git repositories (test/testdata/git) that try to reach past their
// namespace: escape holds a ClusterRoleBinding to cluster-admin and a
// ConfigMap in kube-system beside its VM; clone a DataVolume and a VM's
// dataVolumeTemplate cloning team-b's PVC secret-db-disk; reach a
// ConfigMap in team-b beside its VM.
const (
	escapeRepo = "escape.git"
	cloneRepo  = "clone.git"
	reachRepo  = "reach.git"
	// rolloutRepo holds two commits, tagged v1 and v2
	// (test/testdata/git/rollout): the VM with 1Gi, then 2Gi.
	rolloutRepo = "rollout.git"
)

// TestGitSourceConfined: a team's FleetVirtualMachine whose git repository
// holds a ClusterRoleBinding to cluster-admin and a ConfigMap in
// kube-system. Real Argo CD refuses the sync under the namespace's own
// project, the FleetVM says why, and neither object, nor the VM, reaches
// any cluster.
func TestGitSourceConfined(t *testing.T) {
	checkArgoCD(t)
	ctx := t.Context()
	const ns = "team-escape"
	c := refusedGitSource(t, ns, escapeRepo, "is not permitted in project fleetvm-team-escape")
	for _, want := range []string{"ClusterRoleBinding", "kube-system"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Delivered does not name %s: %q", want, c.Message)
		}
	}
	for _, s := range fleet.Spokes {
		err := s.Client.Get(ctx, client.ObjectKey{Name: "escape-cluster-admin"}, &rbacv1.ClusterRoleBinding{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: ClusterRoleBinding escape-cluster-admin: %v, want none", s.Name, err)
		}
		err = s.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "escape"}, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: ConfigMap kube-system/escape: %v, want none", s.Name, err)
		}
		err = s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "escape"}, &kubevirtv1.VirtualMachine{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: the VM was synced beside the refused objects: %v", s.Name, err)
		}
	}
}

func TestDeletion(t *testing.T) {
	checkArgoCD(t)
	DeletionSpec(t, LifecycleInput{
		Hub:           fleet.Hub.Client,
		Spokes:        spokes(),
		ArgoNamespace: localfleet.ArgoNamespace,
		Namespace:     "e2e-delete",
		Environment:   "prod",
		Timeout:       timeout,
	})
}

// TestGitSourceCloneRefused: a team's git repository holds a DataVolume
// and a VM whose dataVolumeTemplate clone team-b's PVC. The project allows
// both kinds in the team's namespace, so only the cluster can refuse them:
// Argo CD applies them as the team's ServiceAccount (sync impersonation),
// the spokes' clone authorization (CDI's and KubeVirt's, here their
// stand-in) refuses the clone, the FleetVM says the sync failed and why,
// and no copy of the disk exists on any cluster.
func TestGitSourceCloneRefused(t *testing.T) {
	checkArgoCD(t)
	ctx := t.Context()
	const ns = "team-clone"
	for _, s := range fleet.Spokes {
		if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		disk := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "secret-db-disk"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if err := s.Client.Create(ctx, disk); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	c := refusedGitSource(t, ns, cloneRepo, "insufficient permissions in clone source namespace team-b")
	if !strings.Contains(c.Message, "system:serviceaccount:"+ns+":fleetvm-tenant") {
		t.Errorf("Delivered does not name the account Argo CD synced as: %q", c.Message)
	}
	for _, s := range fleet.Spokes {
		var dvs cdiv1beta1.DataVolumeList
		if err := s.Client.List(ctx, &dvs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, dv := range dvs.Items {
			t.Errorf("%s: DataVolume %s/%s exists: a clone of team-b's disk", s.Name, dv.Namespace, dv.Name)
		}
		var pvcs corev1.PersistentVolumeClaimList
		if err := s.Client.List(ctx, &pvcs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, p := range pvcs.Items {
			t.Errorf("%s: PVC %s/%s exists: a clone of team-b's disk", s.Name, p.Namespace, p.Name)
		}
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "clone"}, &kubevirtv1.VirtualMachine{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: VM %s/clone, which clones team-b's disk: %v, want none", s.Name, ns, err)
		}
	}
}

// TestGitSourceOtherNamespace: a team's git repository writes a ConfigMap
// into team-b's namespace beside its VM. Argo CD refuses the sync under
// the team's project, the FleetVM says why, and nothing reaches team-b.
func TestGitSourceOtherNamespace(t *testing.T) {
	checkArgoCD(t)
	ctx := t.Context()
	const ns = "team-reach"
	c := refusedGitSource(t, ns, reachRepo, "namespace team-b is not permitted in project")
	if !strings.Contains(c.Message, "team-b") {
		t.Errorf("Delivered does not name namespace team-b: %q", c.Message)
	}
	for _, s := range fleet.Spokes {
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "reach"}, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: ConfigMap team-b/reach: %v, want none", s.Name, err)
		}
		err = s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reach"}, &kubevirtv1.VirtualMachine{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: the VM was synced beside the refused ConfigMap: %v", s.Name, err)
		}
	}
}

// refusedGitSource creates, in a team namespace ns, a FleetVirtualMachine
// delivering the git repository repo to the prod clusters, and waits until
// its Delivered condition says the sync failed with want in the message.
// It checks the FleetVM says Argo CD syncs as the team (Confined) and
// returns Delivered.
func refusedGitSource(t *testing.T, ns, repo, want string) *metav1.Condition {
	t.Helper()
	ctx := t.Context()
	if err := tenantNamespace(ctx, fleet.Hub.Client, ns); err != nil {
		t.Fatal(err)
	}
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.TrimSuffix(repo, ".git")},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Source:         &fleetv1alpha1.GitSource{RepoURL: fleet.GitRepoURLs[repo], Path: ".", TargetRevision: "main"},
			Placement:      fleetv1alpha1.FleetPlacement{Environment: "prod"},
			RunStrategy:    fleetv1alpha1.RunStrategyAlways,
			DeletionPolicy: fleetv1alpha1.DeletionPolicyDelete,
		},
	}
	if err := fleet.Hub.Client.Create(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Hub.Client.Delete(context.Background(), fvm) })
	var got fleetv1alpha1.FleetVirtualMachine
	err := fleetenv.Eventually(ctx, timeout, func() (bool, error) {
		if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(fvm), &got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionDelivered)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == fleetv1alpha1.ReasonDeliveryFailed && strings.Contains(c.Message, want), nil
	})
	if err != nil {
		t.Fatalf("Delivered never said the sync failed with %q: %v\nconditions: %+v", want, err, got.Status.Conditions)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionDelivered)
	t.Logf("Delivered: %s", c.Message)
	if confined := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionConfined); confined == nil || confined.Status != metav1.ConditionTrue {
		t.Errorf("Confined = %+v, want True: the local fleet's Argo CD syncs as the team", confined)
	}
	return c
}
