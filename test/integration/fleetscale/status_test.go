// Package fleetscale runs fleetvm-hub against a fleet of 5,000
// ManagedClusters with 63-character names on a real hub API server, with
// the real OCM placement scheduler, and checks that the status of a
// FleetVirtualMachine on every cluster is accepted by the CRD's validation
// and stays small.
package fleetscale

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/hub"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
)

const (
	argoNS   = "argocd"
	clusters = 5000
	// unreachable clusters have no Available condition: the hub shows them
	// Unknown. They are the clusters that need attention.
	everyUnreachable = 1000
)

// clusterName is a 63-character name, the longest a ManagedCluster may
// have, in the style of ACM fleets named after site and rack.
func clusterName(i int) string {
	suffix := fmt.Sprintf("-rack-%04d", i)
	return "site-" + strings.Repeat("a", 63-len("site-")-len(suffix)) + suffix
}

func TestStatusOfFiveThousandClusters(t *testing.T) {
	ctx := t.Context()
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	f, err := fleetenv.Start(ctx, fleetenv.Options{Scheme: agenttest.APIScheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	c := f.Hub.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	// The fleet: ManagedClusters only (no cluster namespaces, no agents,
	// no Argo CD), so 5,000 register in seconds.
	start := time.Now()
	if err := fleetenv.EnsureClusterSet(ctx, c, "default"); err != nil {
		t.Fatal(err)
	}
	var unreachable []string
	for i := 0; i < clusters; i += everyUnreachable {
		unreachable = append(unreachable, clusterName(i))
	}
	if err := fleetenv.Parallel(ctx, clusters, 16, func(ctx context.Context, i int) error {
		mc := &clusterv1.ManagedCluster{
			ObjectMeta: metav1.ObjectMeta{Name: clusterName(i), Labels: map[string]string{
				clusterv1beta2.ClusterSetLabel: "default", "env": "scale",
			}},
			Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true},
		}
		if err := c.Create(ctx, mc); err != nil {
			return fmt.Errorf("create ManagedCluster %s: %w", mc.Name, err)
		}
		if i%everyUnreachable == 0 {
			return nil
		}
		return fleetenv.SetClusterAvailable(ctx, c, mc.Name, metav1.ConditionTrue)
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ManagedClusters with 63-character names registered in %s", clusters, time.Since(start).Truncate(time.Millisecond))

	stop, err := startHub(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := f.Hub.Tenant(ctx, "scale"); err != nil {
		t.Fatal(err)
	}
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "scale", Name: "everywhere"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			// A git source without required networks needs no capacity
			// score: every cluster of the environment qualifies.
			Source:         &fleetv1alpha1.GitSource{RepoURL: "https://git.fleet.invalid/vms.git", Path: "vm/overlays/{{environment}}", TargetRevision: "main"},
			Placement:      fleetv1alpha1.FleetPlacement{Environment: "scale"},
			RunStrategy:    fleetv1alpha1.RunStrategyAlways,
			DeletionPolicy: fleetv1alpha1.DeletionPolicyOrphan,
		},
	}
	if err := c.Create(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	got := fleetrun.WaitFVM(t, c, client.ObjectKeyFromObject(fvm), 4*time.Minute, "the status records every cluster", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return len(f.Status.Clusters) == clusters
	})
	t.Logf("status with %d clusters written in %s", clusters, time.Since(start).Truncate(time.Millisecond))

	// What the API server holds, read whole: metadata (managedFields
	// included), spec and status.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("FleetVirtualMachine"))
	if err := c.Get(ctx, client.ObjectKeyFromObject(fvm), u); err != nil {
		t.Fatal(err)
	}
	whole, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	status, _ := json.Marshal(u.Object["status"])
	managed, _ := json.Marshal(u.Object["metadata"].(map[string]any)["managedFields"])
	t.Logf("FleetVirtualMachine at %d clusters: %d bytes (status %d, managedFields %d)", clusters, len(whole), len(status), len(managed))
	if len(whole) > 1<<20 {
		t.Errorf("the object is %d bytes: want well under etcd's 1.5 MiB request limit (under 1 MiB)", len(whole))
	}

	if got.Status.ObservedGeneration != got.Generation || got.Status.Summary.Placed != clusters || got.Status.Summary.Unknown != int32(len(unreachable)) {
		t.Errorf("summary %+v, observedGeneration %d of %d: want every cluster placed, %d unknown",
			got.Status.Summary, got.Status.ObservedGeneration, got.Generation, len(unreachable))
	}
	for _, cond := range got.Status.Conditions {
		if n := utf8.RuneCountInString(cond.Message); n > 4096 {
			t.Errorf("condition %s: message of %d characters", cond.Type, n)
		}
	}
	// The clusters that need attention are named, in the conditions and
	// with their details.
	degraded := findCondition(got, fleetv1alpha1.ConditionDegraded)
	entries := map[string]fleetv1alpha1.ClusterStatus{}
	for _, e := range got.Status.Clusters {
		entries[e.Cluster] = e
	}
	for _, name := range unreachable {
		if !strings.Contains(degraded.Message, name) {
			t.Errorf("Degraded does not name unreachable cluster %s: %s", name, degraded.Message)
		}
		if e := entries[name]; e.Phase != fleetv1alpha1.ClusterPhaseUnknown || e.Message == "" {
			t.Errorf("cluster %s: phase %q, message %q: want Unknown, explained", name, e.Phase, e.Message)
		}
	}
	t.Logf("Degraded: %s", degraded.Message)
	t.Logf("Ready: %s", findCondition(got, fleetv1alpha1.ConditionReady).Message)
}

func findCondition(fvm *fleetv1alpha1.FleetVirtualMachine, typ string) metav1.Condition {
	for _, c := range fvm.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// startHub runs fleetvm-hub's reconcilers in this process, as the binary
// would, and returns how to stop them.
func startHub(ctx context.Context, f *fleetenv.Fleet) (func(), error) {
	cfg := fleetvirtualmachine.DefaultConfig()
	cfg.ArgoNamespace = argoNS
	cfg.Chart.RepoURL = "https://charts.fleet.invalid/fleetvm.git"
	mgr, err := ctrl.NewManager(f.Hub.Config, ctrl.Options{
		Scheme:     hub.Scheme(),
		Cache:      hub.CacheOptions(f.Hub.Config, argoNS),
		Client:     hub.ClientOptions(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	if err := hub.SetupReconcilers(mctx, mgr, hub.Options{FleetVM: cfg}); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}
