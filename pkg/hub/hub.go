// Package hub assembles fleetvm-hub: the scheme, the manager options and the
// reconcilers, shared by cmd/fleetvm-hub, the tests and the local fleet.
package hub

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetdiskimage"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/movettl"
	"github.com/fleetvm/fleetvm/pkg/controller/shapes"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
)

// Scheme returns the types fleetvm-hub reads and writes. Argo CD's kinds
// are the hub's view of them (package argoapp), under Argo CD's group,
// version and kinds: the hub caches three or more Applications per
// FleetVirtualMachine, Argo CD's Application type is three times the size
// of the fields it reads, and Argo CD's API package links its git, Helm,
// OCI, RBAC and cloud clients into any program that imports it.
func Scheme() *runtime.Scheme {
	return SchemeWith(argoapp.AddToScheme)
}

// SchemeWith returns the kinds of Scheme with Argo CD's kinds as addArgo
// registers them: argoapp.AddToScheme for fleetvm-hub, Argo CD's own for
// the clients of tests that write them as Argo CD or a person does (a
// scheme holds one Go type per kind).
func SchemeWith(addArgo func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		fleetv1alpha1.AddToScheme,
		clusterv1.Install,
		clusterv1alpha1.Install,
		clusterv1beta1.Install,
		clusterv1beta2.Install,
		workv1.Install,
		addArgo,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

// Options are fleetvm-hub's settings.
type Options struct {
	FleetVM fleetvirtualmachine.Config
	// Workers is the number of parallel FleetVirtualMachine reconciles.
	Workers int
	// DiskImages are the FleetDiskImage settings (DefaultConfig when the
	// image namespace is empty).
	DiskImages fleetdiskimage.Config
	// Drain bounds the moves a drain runs at once (drain.DefaultLimits
	// when zero).
	Drain drain.Limits
	// Clock is every reconciler's clock: timestamps, grace periods,
	// retention, and the alarms that end them. The real clock when nil;
	// tests step a fake one past every grace period.
	Clock clock.WithDelayedExecution
}

// CacheOptions strip managedFields from every cached object: the hub never
// reads them, and they are often half an object's size. Argo CD
// Applications are decoded as the hub's view of one (argoapp, see
// Scheme), of ApplicationSets the metadata, labels and annotations held
// without maps, and the digest of their spec (delivery.TrimApplicationSet).
// FleetVirtualMachines keep their status lists in arrays of their length
// (trimFleetVM). ConfigMaps are cached only when FleetVM made them (the fleetvm-shapes
// ConfigMaps), not every ConfigMap of the hub, and in Argo CD's namespace
// only argocd-cm (whether sync impersonation is on). The kinds FleetVM keeps in
// Argo CD's namespace are cached only there: its RBAC there is a Role.
// Every cached object's repeated strings are shared (internStrings), and
// the field indexes are stored for the Lists the hub makes (fieldindex).
// With a cfg, the kinds the hub holds one or more of per FleetVM fill
// their caches from Lists decoded and transformed item by item
// (itemwiseLists); without one, as client-go lists.
func CacheOptions(cfg *rest.Config, argoNamespace string) cache.Options {
	argo := cache.ByObject{Namespaces: map[string]cache.Config{argoNamespace: {}}}
	gitOpsCluster := &unstructured.Unstructured{}
	gitOpsCluster.SetGroupVersionKind(fleetvirtualmachine.GitOpsClusterGVK)
	opts := cache.Options{
		DefaultTransform: then(cache.TransformStripManagedFields()),
		ByObject: map[client.Object]cache.ByObject{
			&clusterv1beta1.Placement{}:         argo,
			&clusterv1beta1.PlacementDecision{}: argo,
			// Not its spec, only the spec's digest and the clusters it
			// delivers to (delivery.TrimApplicationSet).
			&argoapp.ApplicationSet{}: {Namespaces: argo.Namespaces, Transform: then(delivery.TrimApplicationSet)},
			// What the hub reads of an Application (argoapp), of its
			// sync's resources only those that failed (a ByObject
			// transform replaces the default one).
			&argoapp.Application{}:  {Namespaces: argo.Namespaces, Transform: then(argoapp.Trim)},
			tenancy.NewAppProject(): argo,
			gitOpsCluster:           argo,
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
				cache.AllNamespaces: {LabelSelector: labels.SelectorFromSet(labels.Set{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue})},
				argoNamespace: {
					LabelSelector: labels.Everything(),
					FieldSelector: fields.OneTermEqualSelector("metadata.name", fleetvirtualmachine.ArgoCDConfigMap),
				},
			}},
			// Only the fleetvm agents' capacity scores, not other addons'.
			// Read without a deep copy: the hub reads every cluster's score
			// to rank a FleetVM's candidates, never changes one, and keeps
			// their values parsed (capacity.Scores).
			&clusterv1alpha1.AddOnPlacementScore{}: {
				Field:                 fields.OneTermEqualSelector("metadata.name", fleetv1alpha1.CapacityScoreName),
				UnsafeDisableDeepCopy: ptr.To(true),
			},
			// Not their labels (trimVMReport).
			&fleetv1alpha1.VMReport{}: {Transform: then(trimVMReport)},
			// Status lists at their length (trimFleetVM).
			&fleetv1alpha1.FleetVirtualMachine{}: {Transform: then(trimFleetVM)},
			// Only FleetVM's ManifestWorks (disk images), not the addons'.
			&workv1.ManifestWork{}: {Label: labels.SelectorFromSet(labels.Set{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue})},
		},
	}
	if cfg != nil {
		opts.NewInformer = itemwiseLists(cfg, Scheme(), &opts)
	}
	return opts
}

// CacheTransform is the transform the hub's cache runs on every object of
// obj's kind it decodes (CacheOptions): what it makes of the object is
// what the hub holds of it.
func CacheTransform(obj client.Object) toolscache.TransformFunc {
	opts := CacheOptions(nil, "")
	for kind, by := range opts.ByObject {
		if reflect.TypeOf(kind) == reflect.TypeOf(obj) && by.Transform != nil {
			return by.Transform
		}
	}
	return opts.DefaultTransform
}

// ClientOptions makes reads of unstructured objects (GitOpsClusters,
// AppProjects) go through the cache too.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// SetupReconcilers registers the indexes and reconcilers with the manager.
func SetupReconcilers(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := fleetvirtualmachine.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := fleetdiskimage.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	// The kinds indexed above have their informers from here, and the
	// cache lists them all at once as it starts; a controller's watch
	// makes its informer only once those synced. So a restarting hub
	// listed its ApplicationSets, one per FleetVirtualMachine, alone after
	// the rest: 7 to 22 s of a restart at 10,000 on 2 cores. Their
	// informer starts with the others now (on 2 cores the Lists then share
	// the cores and the restart is steady no sooner; the benchmarks guide).
	if _, err := mgr.GetCache().GetInformer(ctx, &argoapp.ApplicationSet{}, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("ApplicationSet informer: %w", err)
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &fleetvirtualmachine.Reconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorderFor("fleetvm-hub"),
		Clock:                   clk,
		Config:                  opts.FleetVM,
		MaxConcurrentReconciles: opts.Workers,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up FleetVirtualMachine controller: %w", err)
	}
	images := &fleetdiskimage.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor("fleetvm-hub"),
		Clock:    clk,
		Config:   opts.DiskImages,
	}
	if images.Config.ImageNamespace == "" {
		images.Config = fleetdiskimage.DefaultConfig()
	}
	if err := images.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up FleetDiskImage controller: %w", err)
	}
	drains := &drain.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("fleetvm-hub"), Limits: opts.Drain}
	if err := drains.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up drain controller: %w", err)
	}
	if err := (&movettl.Reconciler{Client: mgr.GetClient(), Clock: clk}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up move TTL controller: %w", err)
	}
	if err := (&shapes.Reconciler{Client: mgr.GetClient(), ShapesPerNamespace: opts.FleetVM.ShapesPerNamespace}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up VM shapes controller: %w", err)
	}
	return nil
}

// trimFleetVM is the cache transform of FleetVirtualMachines: without
// managed fields, without kubectl's last-applied configuration, and with
// the status lists in arrays of their length. The JSON decoder grows a
// list by doubling its array, so a status of 3 copies and 6 conditions
// kept arrays for 4 and 8: 0.6 of a cached FleetVM's 3.4 KiB on the
// benchmark's fleet, and the hub holds one per FleetVM. `kubectl apply`
// (and Argo CD's client-side apply) keeps the whole applied object in an
// annotation, which no FleetVM code reads: 1.3 KiB of a cached FleetVM
// applied so on that fleet. The hub writes a FleetVirtualMachine only
// with merge patches computed from a cached copy (its finalizer) and with
// updates of the status subresource, neither of which changes an
// annotation the copy lacks.
func trimFleetVM(obj any) (any, error) {
	fvm, ok := obj.(*fleetv1alpha1.FleetVirtualMachine)
	if !ok {
		return obj, nil
	}
	fvm.ManagedFields = nil
	if _, ok := fvm.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		delete(fvm.Annotations, corev1.LastAppliedConfigAnnotation)
		if len(fvm.Annotations) == 0 {
			fvm.Annotations = nil
		}
	}
	st := &fvm.Status
	st.Conditions = fitted(st.Conditions)
	st.Clusters = fitted(st.Clusters)
	for i := range st.Clusters {
		st.Clusters[i].IPAddresses = fitted(st.Clusters[i].IPAddresses)
	}
	st.DiskImages = fitted(st.DiskImages)
	if p := st.Placement; p != nil {
		p.DecidedClusters = fitted(p.DecidedClusters)
	}
	return fvm, nil
}

// fitted is s in an array of its own length: the same elements, without
// the room a decoder left after them.
func fitted[S ~[]E, E any](s S) S {
	if len(s) == cap(s) {
		return s
	}
	return append(make(S, 0, len(s)), s...)
}

// trimVMReport is the cache transform of VMReports: the hub finds them by
// their spec (IndexReport) and reads only their spec, never their labels,
// which the agent writes for kubectl, nor their annotations (the agent's
// digest of what it wrote, write.HashAnnotation). Each is a map of its
// own, a fifth and a third of a report in memory, and the hub holds one
// report per copy. The hub never writes a report.
func trimVMReport(obj any) (any, error) {
	if report, ok := obj.(*fleetv1alpha1.VMReport); ok {
		report.ManagedFields = nil
		report.Labels = nil
		report.Annotations = nil
	}
	return obj, nil
}
