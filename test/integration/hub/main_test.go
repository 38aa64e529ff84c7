// Package hub tests fleetvm-hub's FleetVirtualMachine controller on a real
// hub API server with the real OCM placement scheduler, and renders the
// ApplicationSets it writes with Argo CD's own ApplicationSet code.
package hub

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/hub"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/appsetsim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
)

const (
	argoNS      = "argocd"
	gracePeriod = 8 * time.Second
	wait        = 30 * time.Second
)

var (
	fleet *fleetenv.Fleet
	argo  *appsetsim.Sim
	// stopHub stops the running fleetvm-hub manager; startHub starts one.
	stopHub context.CancelFunc
)

// TestMain starts a hub with three clusters (no spokes: the tests write
// what the agents would) and fleetvm-hub's reconcilers, with the delivery
// stand-in's ApplicationSet renderer and cluster secrets.
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet:  fleetenv.Options{Scheme: agenttest.APIScheme()},
		Logger: zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)),
		Setup: func(ctx context.Context, f *fleetenv.Fleet) (func() error, error) {
			fleet = f
			var err error
			if argo, err = appsetsim.New(ctx, f.Hub.Config, f.Hub.Client, argoNS); err == nil {
				err = argo.Setup(ctx)
			}
			if err != nil {
				return nil, err
			}
			for _, c := range []struct{ name, env, region string }{
				{"prod-a", "prod", "east"}, {"prod-b", "prod", "west"}, {"dev-a", "dev", "east"},
			} {
				labels := map[string]string{"env": c.env, "region": c.region}
				if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: c.name, Labels: labels}); err != nil {
					return nil, err
				}
				if err := argo.ClusterSecret(ctx, c.name, labels); err != nil {
					return nil, err
				}
			}
			if err := startHub(ctx); err != nil {
				return nil, err
			}
			return func() error { stopHub(); return nil }, nil
		},
	}))
}

func hubConfig() fleetvirtualmachine.Config {
	c := fleetvirtualmachine.DefaultConfig()
	c.ArgoNamespace = argoNS
	c.GracePeriod = gracePeriod
	c.Chart.RepoURL = "https://charts.fleet.invalid/fleetvm.git"
	return c
}

// startHub runs fleetvm-hub's reconcilers in this process, as the binary
// would, against the hub.
func startHub(ctx context.Context) error {
	return startHubWith(ctx, hubConfig())
}

// startHubWith runs fleetvm-hub's reconcilers with cfg.
func startHubWith(ctx context.Context, cfg fleetvirtualmachine.Config) error {
	return startHubOn(ctx, hub.Options{FleetVM: cfg})
}

// onFakeClock restarts fleetvm-hub on a fake clock until the test ends
// (then on the real one again): nothing but the test's steps ends a grace
// period.
func onFakeClock(t *testing.T) *clocktesting.FakeClock {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	stopHub()
	if err := startHubOn(context.Background(), hub.Options{FleetVM: hubConfig(), Clock: clk}); err != nil { // outlives this test
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopHub()
		if err := startHub(context.Background()); err != nil {
			t.Errorf("restart fleetvm-hub on the real clock: %v", err)
		}
	})
	return clk
}

// startHubOn runs fleetvm-hub's reconcilers with opts (a fake clock, say).
func startHubOn(ctx context.Context, opts hub.Options) error {
	mgr, err := ctrl.NewManager(fleet.Hub.Config, ctrl.Options{
		Scheme:  hub.Scheme(),
		Cache:   hub.CacheOptions(fleet.Hub.Config, argoNS),
		Client:  hub.ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Tests restart the hub in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(ctx)
	if err := hub.SetupReconcilers(mctx, mgr, opts); err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	stopHub = func() { cancel(); <-done }
	return nil
}

// publishScores writes the fleetvm-capacity score of a cluster as the agent
// would: free capacity and how many VMs of each shape fit, by the shape's
// score name.
func publishScores(t *testing.T, cluster string, fits map[string]int32) {
	t.Helper()
	ctx := t.Context()
	score := &clusterv1alpha1.AddOnPlacementScore{ObjectMeta: metav1.ObjectMeta{Name: fleetv1alpha1.CapacityScoreName, Namespace: cluster}}
	err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(score), score)
	if err != nil {
		if err := fleet.Hub.Client.Create(ctx, score); err != nil {
			t.Fatal(err)
		}
	}
	score.Status.Scores = []clusterv1alpha1.AddOnPlacementScoreItem{
		{Name: capacity.ScoreCPUFree, Value: 10}, {Name: capacity.ScoreMemoryFree, Value: 10},
	}
	for name, n := range fits {
		score.Status.Scores = append(score.Status.Scores, clusterv1alpha1.AddOnPlacementScoreItem{Name: name, Value: n})
	}
	valid := metav1.NewTime(time.Now().Add(time.Hour))
	score.Status.ValidUntil = &valid
	if err := fleet.Hub.Client.Status().Update(ctx, score); err != nil {
		t.Fatal(err)
	}
}

func shape(cpu, mem string) capacity.Shape {
	return capacity.Shape{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}
}

func createFVM(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	if err := fleet.Hub.Tenant(t.Context(), fvm.Namespace); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Create(t.Context(), fvm); err != nil {
		t.Fatalf("create FleetVirtualMachine: %v", err)
	}
	// No agent runs here: its copies stay Pending, arriving, and would
	// take the room the next test's clusters score.
	t.Cleanup(func() {
		if err := fleet.Hub.Client.Delete(context.Background(), fvm); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete FleetVirtualMachine %s/%s: %v", fvm.Namespace, fvm.Name, err)
		}
	})
}

// waitFor polls the FleetVirtualMachine until cond holds.
func waitFor(t *testing.T, key client.ObjectKey, what string, cond func(*fleetv1alpha1.FleetVirtualMachine) bool) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	return fleetrun.WaitFVM(t, fleet.Hub.Client, key, wait, what, cond)
}

// decided lists the clusters the FleetVM's status has the VM placed on
// (not leaving or removing), sorted.
func decided(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	var out []string
	for _, c := range fvm.Status.Clusters {
		if c.Phase != fleetv1alpha1.ClusterPhaseLeaving && c.Phase != fleetv1alpha1.ClusterPhaseRemoving {
			out = append(out, c.Cluster)
		}
	}
	return out
}

// applications lists the Applications of a FleetVirtualMachine by cluster.
func applications(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) map[string]argov1alpha1.Application {
	t.Helper()
	return fleetrun.Applications(t, fleet.Hub.Client, argoNS, client.ObjectKeyFromObject(fvm))
}

func appSetKey(fvm *fleetv1alpha1.FleetVirtualMachine) client.ObjectKey {
	return client.ObjectKey{Namespace: argoNS, Name: delivery.ChildName(client.ObjectKeyFromObject(fvm))}
}

// placementKey is the Placement the FleetVM's status names: the candidate
// Placement it shares.
func placementKey(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) client.ObjectKey {
	t.Helper()
	return client.ObjectKey{Namespace: argoNS, Name: fleetrun.PlacementName(t, fleet.Hub.Client, client.ObjectKeyFromObject(fvm), wait)}
}

// placementReleased: the Placement is gone, or another FleetVM still uses
// it (a candidate Placement goes with its last user).
func placementReleased(ctx context.Context, key client.ObjectKey) (bool, error) {
	err := fleet.Hub.Client.Get(ctx, key, &clusterv1beta1.Placement{})
	if apierrors.IsNotFound(err) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	var all fleetv1alpha1.FleetVirtualMachineList
	if err := fleet.Hub.Client.List(ctx, &all); err != nil {
		return false, err
	}
	for _, f := range all.Items {
		if p := f.Status.Placement; f.DeletionTimestamp == nil && p != nil && p.Name == key.Name {
			return true, nil
		}
	}
	return false, nil
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func gitOpsCluster() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps.open-cluster-management.io", Version: "v1beta1", Kind: "GitOpsCluster"})
	return u
}
