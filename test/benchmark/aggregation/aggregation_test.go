// Package aggregation benchmarks what one changed agent report costs the
// hub: the FleetVirtualMachine reconcile it triggers, reading from the
// manager's cache and writing the status to a real hub API server.
//
// For N = 10, 100 and 1000 clusters, the hub holds a fleet of that size:
// the ManagedClusters, and for N background FleetVMs of 3 copies each their
// Applications, PlacementDecisions and VM reports (so the caches grow with
// the fleet). One FleetVM under test is placed on 3 clusters ("spread=3")
// or on every cluster ("spread=all"). Each operation flips one of its
// reports (written to the API server and seen by the cache, untimed), then
// times the reconcile, which issues the one status write. The API server
// and scheduler are the same as production's; decisions are written by the
// benchmark as the scheduler writes them, so that what is measured is the
// hub alone.
//
// Run: make bench-aggregation (or go test -run '^$' -bench . -benchmem
// ./test/benchmark/aggregation/). Without -bench nothing starts.
package aggregation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/hub"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

const (
	argoNS    = "argocd"
	fvmNS     = "bench"
	cacheWait = 2 * time.Minute
)

// env is one hub shared by every sub-benchmark; clusters are added as the
// sizes grow.
type env struct {
	fleet    *fleetenv.Fleet
	cache    client.Client // the manager's client: cache reads, direct writes
	direct   client.Client
	clusters int
	stop     func()
}

var (
	runs     atomic.Int64
	once     sync.Once
	shared   *env
	startErr error
)

func setup(b *testing.B) *env {
	b.Helper()
	once.Do(func() { shared, startErr = start() })
	if startErr != nil {
		b.Fatal(startErr)
	}
	return shared
}

func start() (*env, error) {
	ctrl.SetLogger(agenttest.Logger())
	ctx, cancel := context.WithCancel(context.Background())
	f, err := fleetenv.Start(ctx, fleetenv.Options{NoPlacementController: true})
	if err != nil {
		cancel()
		return nil, err
	}
	mgr, err := ctrl.NewManager(f.Hub.Config, ctrl.Options{
		Scheme:  hub.Scheme(),
		Cache:   hub.CacheOptions(f.Hub.Config, argoNS),
		Client:  hub.ClientOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Logger:  agenttest.Logger(),
	})
	if err == nil {
		err = fleetvirtualmachine.SetupIndexes(ctx, mgr.GetFieldIndexer())
	}
	if err != nil {
		cancel()
		_ = f.Stop()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		_ = f.Stop()
		return nil, fmt.Errorf("cache did not sync")
	}
	if err := f.Hub.EnsureNamespace(ctx, argoNS); err != nil {
		cancel()
		_ = f.Stop()
		return nil, err
	}
	if err := f.Hub.Tenant(ctx, fvmNS); err != nil {
		cancel()
		_ = f.Stop()
		return nil, err
	}
	return &env{fleet: f, cache: mgr.GetClient(), direct: f.Hub.Client, stop: func() {
		cancel()
		<-done
		_ = f.Stop()
	}}, nil
}

func clusterName(i int) string { return fmt.Sprintf("cluster-%04d", i) }

// grow registers clusters up to n, with n background FleetVMs' objects:
// for background FleetVM i, 3 Applications, a PlacementDecision and 3 VM
// reports on clusters i, i+1, i+2.
func (e *env) grow(b *testing.B, n int) {
	b.Helper()
	ctx := context.Background()
	for i := e.clusters; i < n; i++ {
		name := clusterName(i)
		if err := e.fleet.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: name, Labels: map[string]string{"env": "prod"}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := e.clusters; i < n; i++ {
		owner := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "background", Name: fmt.Sprintf("vm-%04d", i)}}
		placed := []string{clusterName(i), clusterName((i + 1) % n), clusterName((i + 2) % n)}
		if err := e.decide(ctx, delivery.ChildName(client.ObjectKeyFromObject(owner)), placed); err != nil {
			b.Fatal(err)
		}
		for _, c := range placed {
			if err := e.createApp(ctx, owner, c); err != nil {
				b.Fatal(err)
			}
			if err := e.writeReport(ctx, owner, c, "Running", true); err != nil {
				b.Fatal(err)
			}
		}
	}
	e.clusters = n
	// The cache holds every Application once the last one is there.
	e.waitCache(b, func() (bool, error) {
		var apps argoapp.ApplicationList
		if err := e.cache.List(ctx, &apps, client.InNamespace(argoNS)); err != nil {
			return false, err
		}
		return len(apps.Items) >= 3*n, nil
	})
}

func (e *env) waitCache(b *testing.B, cond func() (bool, error)) {
	b.Helper()
	if err := fleetenv.Eventually(context.Background(), cacheWait, cond); err != nil {
		b.Fatalf("cache: %v", err)
	}
}

// fits writes a cluster's capacity score as its agent would when one VM of
// the shape fits there.
func (e *env) fits(ctx context.Context, cluster, shape string) error {
	score := &clusterv1alpha1.AddOnPlacementScore{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: fleetv1alpha1.CapacityScoreName}}
	if err := e.direct.Create(ctx, score); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := e.direct.Get(ctx, client.ObjectKeyFromObject(score), score); err != nil {
		return err
	}
	valid := metav1.NewTime(time.Now().Add(time.Hour))
	score.Status = clusterv1alpha1.AddOnPlacementScoreStatus{ValidUntil: &valid,
		Scores: []clusterv1alpha1.AddOnPlacementScoreItem{{Name: shape, Value: 1}}}
	return e.direct.Status().Update(ctx, score)
}

// decide writes the PlacementDecisions of a Placement as the scheduler
// does: at most 100 clusters per decision object.
func (e *env) decide(ctx context.Context, placement string, clusters []string) error {
	for part := 0; part*100 < len(clusters); part++ {
		d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{
			Namespace: argoNS, Name: fmt.Sprintf("%s-decision-%d", placement, part+1),
			Labels: map[string]string{clusterv1beta1.PlacementLabel: placement},
		}}
		if err := e.direct.Create(ctx, d); err != nil {
			return err
		}
		for _, c := range clusters[part*100 : min(len(clusters), (part+1)*100)] {
			d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: c})
		}
		if err := e.direct.Status().Update(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) createApp(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, cluster string) error {
	app := &argov1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: delivery.ChildName(client.ObjectKeyFromObject(fvm)) + "." + cluster, Labels: map[string]string{
			fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace,
			fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue, fleetv1alpha1.LabelCluster: cluster,
		}},
		Spec: argov1alpha1.ApplicationSpec{
			Project:     "default",
			Destination: argov1alpha1.ApplicationDestination{Name: cluster, Namespace: fvm.Namespace},
			Source:      &argov1alpha1.ApplicationSource{RepoURL: "https://charts.fleet.invalid", Chart: "fleetvm-vm", TargetRevision: "0.1.0"},
		},
		Status: argov1alpha1.ApplicationStatus{
			Sync:   argov1alpha1.SyncStatus{Status: argov1alpha1.SyncStatusCodeSynced},
			Health: argov1alpha1.AppHealthStatus{Status: health.HealthStatusHealthy},
		},
	}
	return e.direct.Create(ctx, app)
}

// writeReport writes the VM report of a FleetVM on a cluster as the agent
// does, and returns once the API server holds it.
func (e *env) writeReport(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, cluster, printable string, ready bool) error {
	r := &fleetv1alpha1.VMReport{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: fvm.Namespace + "." + fvm.Name}}
	spec := fleetv1alpha1.VMReportSpec{
		FleetVM: fleetv1alpha1.FleetVMReference{Namespace: fvm.Namespace, Name: fvm.Name},
		VMs: []fleetv1alpha1.VMState{{
			Namespace: fvm.Namespace, Name: fvm.Name, PrintableStatus: printable, Ready: ready,
			Node: cluster + "-node-1", IPAddresses: []string{"10.128.0.7"}, Generation: 1, ObservedGeneration: 1,
			DiskImages: []string{"datasource:os-images/rhel9"},
		}},
	}
	if err := e.direct.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
		r.Spec = spec
		return e.direct.Create(ctx, r)
	}
	r.Spec = spec
	return e.direct.Update(ctx, r)
}

func BenchmarkAggregation(b *testing.B) {
	e := setup(b)
	for _, n := range []int{10, 100, 1000} {
		e.grow(b, n)
		for _, spread := range []int{3, n} {
			label := "3"
			if spread == n {
				label = "all"
			}
			b.Run(fmt.Sprintf("clusters=%d/spread=%s", n, label), func(b *testing.B) {
				benchmarkChangedReport(b, e, n, spread)
			})
		}
	}
	e.stop()
}

// benchmarkChangedReport times the reconcile one changed report triggers.
func benchmarkChangedReport(b *testing.B, e *env, n, spread int) {
	ctx := context.Background()
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		// The framework calls a benchmark more than once (b.N = 1 first).
		ObjectMeta: metav1.ObjectMeta{Namespace: fvmNS, Name: fmt.Sprintf("under-test-%d-%d-%d", n, spread, runs.Add(1))},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Template:  &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{"domain":{"cpu":{"cores":2},"memory":{"guest":"4Gi"},"devices":{}}}}}}`)},
			Placement: fleetv1alpha1.FleetPlacement{Environment: "prod", Clusters: ptr.To(int32(spread))},
		},
	}
	if err := e.direct.Create(ctx, fvm); err != nil {
		b.Fatal(err)
	}
	key := client.ObjectKeyFromObject(fvm)
	var writes atomic.Int64
	counting := interceptor.NewClient(noWatch{e.cache}, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			writes.Add(1)
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			writes.Add(1)
			return c.Update(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			writes.Add(1)
			return c.Patch(ctx, o, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			writes.Add(1)
			return c.Delete(ctx, o, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
			writes.Add(1)
			return c.SubResource(sub).Update(ctx, o, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes.Add(1)
			return c.SubResource(sub).Patch(ctx, o, p, opts...)
		},
	})
	cfg := fleetvirtualmachine.DefaultConfig()
	cfg.ArgoNamespace = argoNS
	// The candidate Placement's decision is written as the scheduler
	// would, and the placed clusters' scores let the VM in: what a report
	// costs does not depend on how the clusters were picked.
	r := &fleetvirtualmachine.Reconciler{Client: counting, Recorder: record.NewFakeRecorder(1 << 16), Clock: clock.RealClock{}, Config: cfg}
	req := ctrl.Request{NamespacedName: key}

	// First reconciles create the Placement and ApplicationSet; then the
	// scheduler's part (decision, Satisfied) and Argo CD's (Applications)
	// are written, and the VMs report Running.
	e.waitCache(b, func() (bool, error) { return e.cache.Get(ctx, key, &fleetv1alpha1.FleetVirtualMachine{}) == nil, nil })
	if _, err := r.Reconcile(ctx, req); err != nil {
		b.Fatal(err)
	}
	placed := make([]string, spread)
	for i := range placed {
		placed[i] = clusterName(i)
	}
	var placement string
	e.waitCache(b, func() (bool, error) {
		var got fleetv1alpha1.FleetVirtualMachine
		if err := e.direct.Get(ctx, key, &got); err != nil {
			return false, err
		}
		if got.Status.Placement != nil {
			placement = got.Status.Placement.Name
		}
		return placement != "", nil
	})
	p := &clusterv1beta1.Placement{}
	if err := e.direct.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: placement}, p); err != nil {
		b.Fatal(err)
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: clusterv1beta1.PlacementConditionSatisfied, Status: metav1.ConditionTrue, Reason: "AllDecisionsScheduled", ObservedGeneration: p.Generation,
	})
	p.Status.NumberOfSelectedClusters = int32(spread)
	if err := e.direct.Status().Update(ctx, p); err != nil {
		b.Fatal(err)
	}
	if err := e.decide(ctx, placement, placed); err != nil {
		b.Fatal(err)
	}
	shape, ok := capacity.ShapeOf(fvm)
	if !ok {
		b.Fatal("the FleetVM under test has no VM shape")
	}
	for _, c := range placed {
		if err := e.fits(ctx, c, shape.Name()); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range placed {
		if err := e.createApp(ctx, fvm, c); err != nil {
			b.Fatal(err)
		}
		if err := e.writeReport(ctx, fvm, c, "Running", true); err != nil {
			b.Fatal(err)
		}
	}
	e.waitCache(b, func() (bool, error) {
		var apps argoapp.ApplicationList
		if err := e.cache.List(ctx, &apps, client.InNamespace(argoNS), client.MatchingFields{fleetvirtualmachine.IndexOwner: key.String()}); err != nil {
			return false, err
		}
		var last fleetv1alpha1.VMReport
		if err := e.cache.Get(ctx, client.ObjectKey{Namespace: placed[spread-1], Name: fvmNS + "." + fvm.Name}, &last); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return len(apps.Items) == spread, nil
	})
	settle := func() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		e.waitCache(b, func() (bool, error) {
			var got, direct fleetv1alpha1.FleetVirtualMachine
			if err := e.direct.Get(ctx, key, &direct); err != nil {
				return false, err
			}
			err := e.cache.Get(ctx, key, &got)
			return err == nil && got.ResourceVersion == direct.ResourceVersion, err
		})
	}
	settle()
	var fresh fleetv1alpha1.FleetVirtualMachine
	if err := e.cache.Get(ctx, key, &fresh); err != nil {
		b.Fatal(err)
	}
	if fresh.Status.Summary.Ready != int32(spread) {
		b.Fatalf("setup: %d of %d ready: %+v", fresh.Status.Summary.Ready, spread, fresh.Status.Summary)
	}

	writes.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cluster := placed[i%spread]
		printable, ready := "Stopped", false
		if (i/spread)%2 == 1 {
			printable, ready = "Running", true
		}
		if err := e.writeReport(ctx, fvm, cluster, printable, ready); err != nil {
			b.Fatal(err)
		}
		e.waitCache(b, func() (bool, error) {
			var got fleetv1alpha1.VMReport
			err := e.cache.Get(ctx, client.ObjectKey{Namespace: cluster, Name: fvmNS + "." + fvm.Name}, &got)
			return err == nil && got.Spec.VMs[0].PrintableStatus == printable, err
		})
		b.StartTimer()
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// The next change starts from the status just written.
		e.waitCache(b, func() (bool, error) {
			var got, direct fleetv1alpha1.FleetVirtualMachine
			if err := e.direct.Get(ctx, key, &direct); err != nil {
				return false, err
			}
			err := e.cache.Get(ctx, key, &got)
			return err == nil && got.ResourceVersion == direct.ResourceVersion, err
		})
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
	var final fleetv1alpha1.FleetVirtualMachine
	if err := e.direct.Get(ctx, key, &final); err != nil {
		b.Fatal(err)
	}
	if len(final.Status.Clusters) != spread {
		b.Fatalf("status lists %d clusters, want %d", len(final.Status.Clusters), spread)
	}
}

// noWatch lets the interceptor wrap the manager's client, which has no
// Watch; the reconciler never watches through its client.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch through the reconciler's client is not supported")
}
