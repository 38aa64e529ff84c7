// Package fleetdiskimage reconciles FleetDiskImages: a ManifestWork per
// cluster that needs the image imports it there through CDI, the clusters'
// inventories count who uses it, and unused copies are pruned after the
// retention period, never on the word of a stale inventory.
package fleetdiskimage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// Config are the hub settings of disk images.
type Config struct {
	// ImageNamespace is the namespace on the clusters images go to.
	ImageNamespace string
	// InventoryMaxAge: an inventory older than this is stale, and nothing
	// is pruned on its word. The agents confirm theirs every 5 minutes.
	InventoryMaxAge time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{ImageNamespace: diskimage.DefaultNamespace, InventoryMaxAge: 15 * time.Minute}
}

// DefaultRetention is spec.retention's default.
const DefaultRetention = 168 * time.Hour

// Indexes.
const (
	// IndexDiskImage indexes FleetVirtualMachines by the FleetDiskImages
	// they list ("namespace/name").
	IndexDiskImage = "fleetvm.io/disk-image"
	// IndexWorkImage indexes ManifestWorks by the FleetDiskImage they carry.
	IndexWorkImage = "fleetvm.io/work-image"
	// IndexObjectName indexes FleetDiskImages by their name on the clusters.
	IndexObjectName = "fleetvm.io/image-object"
)

// SetupIndexes registers the indexes.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &fleetv1alpha1.FleetVirtualMachine{}, IndexDiskImage, diskImagesOf); err != nil {
		return fmt.Errorf("index %s: %w", IndexDiskImage, err)
	}
	if err := indexer.IndexField(ctx, &workv1.ManifestWork{}, IndexWorkImage, func(o client.Object) []string {
		if v := o.GetAnnotations()[diskimage.AnnotationImage]; v != "" {
			return []string{v}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexWorkImage, err)
	}
	if err := indexer.IndexField(ctx, &fleetv1alpha1.FleetDiskImage{}, IndexObjectName, func(o client.Object) []string {
		return []string{diskimage.ObjectName(client.ObjectKeyFromObject(o))}
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexObjectName, err)
	}
	return nil
}

// diskImagesOf is IndexDiskImage's value: the FleetDiskImages a
// FleetVirtualMachine lists, "namespace/name".
func diskImagesOf(o client.Object) []string {
	fvm := o.(*fleetv1alpha1.FleetVirtualMachine)
	out := make([]string, 0, len(fvm.Spec.DiskImages))
	for _, d := range fvm.Spec.DiskImages {
		out = append(out, fvm.Namespace+"/"+d.Name)
	}
	return out
}

// Reconciler reconciles FleetDiskImages.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	Config   Config
}

// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetdiskimages,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetdiskimages/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetdiskimages/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleetvm.io,resources=imageinventories,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=work.open-cluster-management.io,resources=manifestworks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch

// Usage is who uses an image: FleetVirtualMachines that list it, and the
// VMs the clusters' inventories count (FleetVM's or not).
type Usage struct {
	FleetVMs []string
	// ByCluster is references per cluster; Users names some VMs,
	// "cluster: namespace/name".
	ByCluster map[string]int32
	Users     []string
	// OtherNamespaces counts the VMs of other namespaces among the users
	// the inventories name: counted, not named.
	OtherNamespaces int
	// Inventories are the clusters' inventories by cluster.
	Inventories map[string]*fleetv1alpha1.ImageInventory
}

// Total is the number of referencing VMs across the fleet.
func (u Usage) Total() int32 {
	var n int32
	for _, c := range u.ByCluster {
		n += c
	}
	return n
}

// InUse tells whether anything still uses the image.
func (u Usage) InUse() bool { return len(u.FleetVMs) > 0 || u.Total() > 0 }

// Summary says who uses the image, for messages: counts and some names.
func (u Usage) Summary() string {
	var parts []string
	if n := u.Total(); n > 0 {
		who := names(u.Users, 5)
		if u.OtherNamespaces > 0 {
			who = strings.TrimPrefix(fmt.Sprintf("%s; %d of other namespaces", who, u.OtherNamespaces), "; ")
		}
		parts = append(parts, fmt.Sprintf("%d VMs on %d clusters reference it (%s)", n, len(u.ByCluster), who))
	}
	if len(u.FleetVMs) > 0 {
		parts = append(parts, fmt.Sprintf("%d FleetVirtualMachines list it in spec.diskImages (%s)", len(u.FleetVMs), names(u.FleetVMs, 5)))
	}
	return strings.Join(parts, "; ")
}

func names(list []string, most int) string {
	if len(list) <= most {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:most], ", "), len(list)-most)
}

// ReadUsage gathers who uses the FleetDiskImage key. It reads every
// cluster's inventory from the cache without copying: O(clusters), for a
// handful of images per reconcile. indexed says c is the hub's cache, with
// IndexDiskImage: the FleetVirtualMachines listing the image are then read
// from the index, without copies; otherwise (the webhook may read straight
// from the API server, which has no such index) the namespace's are listed
// and filtered. Every inventory change wakes the image's reconcile, so
// a namespace of thousands of FleetVMs listed each time would make a burst
// or a drain quadratic.
func ReadUsage(ctx context.Context, c client.Reader, indexed bool, imageNamespace string, key types.NamespacedName) (Usage, error) {
	u := Usage{ByCluster: map[string]int32{}, Inventories: map[string]*fleetv1alpha1.ImageInventory{}}
	var fvms fleetv1alpha1.FleetVirtualMachineList
	opts := []client.ListOption{client.InNamespace(key.Namespace), client.UnsafeDisableDeepCopy}
	if indexed {
		opts = append(opts, client.MatchingFields{IndexDiskImage: key.String()})
	}
	if err := c.List(ctx, &fvms, opts...); err != nil {
		return u, fmt.Errorf("list FleetVirtualMachines using %s: %w", key, err)
	}
	for _, f := range fvms.Items {
		for _, d := range f.Spec.DiskImages {
			if d.Name == key.Name {
				u.FleetVMs = append(u.FleetVMs, f.Namespace+"/"+f.Name)
				break
			}
		}
	}
	sort.Strings(u.FleetVMs)
	var invs fleetv1alpha1.ImageInventoryList
	if err := c.List(ctx, &invs, client.UnsafeDisableDeepCopy); err != nil {
		return u, fmt.Errorf("list ImageInventories: %w", err)
	}
	id := diskimage.ImageID(imageNamespace, key)
	for i := range invs.Items {
		inv := &invs.Items[i]
		if inv.Name != fleetv1alpha1.ImageInventoryName {
			continue
		}
		u.Inventories[inv.Namespace] = inv
		images := inv.Spec.Images
		j, found := slices.BinarySearchFunc(images, id, func(a fleetv1alpha1.ImageUse, id string) int { return strings.Compare(a.Image, id) })
		if !found || images[j].References == 0 {
			continue
		}
		u.ByCluster[inv.Namespace] = images[j].References
		// Only the image's own namespace's VMs are named: a VM of another
		// team is counted, never shown to this one.
		for _, user := range images[j].Users {
			if ns, _, _ := strings.Cut(user, "/"); ns == key.Namespace {
				u.Users = append(u.Users, inv.Namespace+": "+user)
			} else {
				u.OtherNamespaces++
			}
		}
	}
	sort.Strings(u.Users)
	return u, nil
}

// Reconcile distributes, counts and prunes one FleetDiskImage.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fdi := &fleetv1alpha1.FleetDiskImage{}
	if err := r.Client.Get(ctx, req.NamespacedName, fdi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	deleting := fdi.DeletionTimestamp != nil
	if !deleting {
		if _, err := write.AddFinalizer(ctx, r.Client, fdi, diskimage.Finalizer); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	before := fdi.DeepCopy()
	now := r.Clock.Now()

	usage, err := ReadUsage(ctx, r.Client, true, r.Config.ImageNamespace, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	wanted, err := r.wantedClusters(ctx, usage.FleetVMs)
	if err != nil {
		return ctrl.Result{}, err
	}
	var works workv1.ManifestWorkList
	if err := r.Client.List(ctx, &works, client.MatchingFields{IndexWorkImage: req.String()}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list ManifestWorks of %s: %w", req, err)
	}
	byCluster := map[string]*workv1.ManifestWork{}
	for i := range works.Items {
		byCluster[works.Items[i].Namespace] = &works.Items[i]
	}

	in := observed{
		Now: now, Retention: DefaultRetention, Usage: usage, Wanted: wanted, Works: byCluster,
		Previous: map[string]fleetv1alpha1.ImageClusterStatus{}, Untrusted: map[string]string{},
	}
	if fdi.Spec.Retention != nil {
		in.Retention = fdi.Spec.Retention.Duration
	}
	for _, c := range fdi.Status.Clusters {
		in.Previous[c.Cluster] = c
	}
	for cluster := range byCluster {
		// Only copies nothing uses are candidates for pruning.
		if _, want := wanted[cluster]; want || usage.ByCluster[cluster] > 0 {
			continue
		}
		if why := r.unsure(ctx, cluster, usage.Inventories[cluster], now); why != "" {
			in.Untrusted[cluster] = why
		}
	}
	// Deleting and unused: remove every copy the prune rules let go, then
	// let go.
	if deleting && !usage.InUse() {
		return r.delete(ctx, fdi, before, in)
	}
	steps, requeue := plan(in)

	var errs []error
	entries := make([]fleetv1alpha1.ImageClusterStatus, 0, len(steps))
	for _, s := range steps {
		e := s.Entry
		switch {
		case s.Prune != nil:
			if err := r.Client.Delete(ctx, s.Prune); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("prune ManifestWork %s: %w", klog.KObj(s.Prune), err))
				continue
			}
			r.Recorder.Event(fdi, "Normal", "Pruned", s.PruneEvent)
		case s.Ensure:
			got, err := r.ensureWork(ctx, fdi, e.Cluster, byCluster[e.Cluster])
			if err != nil {
				errs = append(errs, err)
				e.Phase, e.Message = fleetv1alpha1.ImagePhasePending, err.Error()
				break
			}
			e.Phase, e.Progress, e.Message = importState(got)
		}
		entries = append(entries, e)
	}
	summarize(fdi, entries, usage, wanted)
	if deleting {
		setDeleting(fdi, "waiting until nothing uses the image: "+usage.Summary())
	}
	if _, err := write.Status(ctx, r.Client, before, fdi); err != nil {
		errs = append(errs, fmt.Errorf("write status of %s: %w", klog.KObj(fdi), err))
	}
	if len(errs) > 0 {
		return ctrl.Result{}, errors.Join(errs...)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// delete removes the copies of a FleetDiskImage being deleted that
// planDeletion lets go, shows those it keeps and why, and removes the
// finalizer once no copy is left.
func (r *Reconciler) delete(ctx context.Context, fdi, before *fleetv1alpha1.FleetDiskImage, in observed) (ctrl.Result, error) {
	d := planDeletion(in)
	if d.Done {
		_, err := write.RemoveFinalizer(ctx, r.Client, fdi, diskimage.Finalizer)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var errs []error
	for _, w := range d.Remove {
		if err := r.Client.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete ManifestWork %s: %w", klog.KObj(w), err))
			continue
		}
		r.Recorder.Eventf(fdi, "Normal", "Removing", "Removing the image from cluster %s: the FleetDiskImage is being deleted", w.Namespace)
	}
	summarize(fdi, d.Entries, in.Usage, in.Wanted)
	msg := d.Waiting
	if msg == "" {
		msg = fmt.Sprintf("removing the image from %d clusters", len(d.Entries))
	}
	setDeleting(fdi, msg)
	if _, err := write.Status(ctx, r.Client, before, fdi); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("write status of %s: %w", klog.KObj(fdi), err))
	}
	// The works' deletion events come back here; a copy kept for its
	// cluster's word is looked at again.
	return ctrl.Result{RequeueAfter: d.Requeue}, errors.Join(errs...)
}

// setDeleting makes Ready say what the deletion waits for.
func setDeleting(fdi *fleetv1alpha1.FleetDiskImage, msg string) {
	meta.SetStatusCondition(&fdi.Status.Conditions, metav1.Condition{
		Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonDeleting,
		Message: msg, ObservedGeneration: fdi.Generation,
	})
}

// unsure says why the cluster's word cannot be trusted for pruning, or "".
func (r *Reconciler) unsure(ctx context.Context, cluster string, inv *fleetv1alpha1.ImageInventory, now time.Time) string {
	mc := &clusterv1.ManagedCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: cluster}, mc); err != nil {
		return "the ManagedCluster cannot be read"
	}
	if !meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable) {
		return "the cluster is not available"
	}
	switch {
	case inv == nil:
		return "the cluster has no image inventory (is the fleetvm agent running?)"
	case inv.Spec.ObservedTime == nil || now.Sub(inv.Spec.ObservedTime.Time) > r.Config.InventoryMaxAge:
		return fmt.Sprintf("the cluster's image inventory is stale (not confirmed for more than %s)", r.Config.InventoryMaxAge)
	}
	return ""
}

// wantedClusters are the clusters of the FleetVirtualMachines that list
// the image: every cluster their status records (placed, leaving or
// removing).
func (r *Reconciler) wantedClusters(ctx context.Context, fvms []string) (map[string]struct{}, error) {
	out := map[string]struct{}{}
	for _, k := range fvms {
		ns, name, _ := strings.Cut(k, "/")
		fvm := &fleetv1alpha1.FleetVirtualMachine{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, fvm); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get FleetVirtualMachine %s: %w", k, err)
		}
		for _, c := range fvm.Status.Clusters {
			out[c.Cluster] = struct{}{}
		}
	}
	return out, nil
}

// ensureWork creates the ManifestWork, or updates its spec when it
// differs, and returns it as the API server holds it.
func (r *Reconciler) ensureWork(ctx context.Context, fdi *fleetv1alpha1.FleetDiskImage, cluster string, got *workv1.ManifestWork) (*workv1.ManifestWork, error) {
	want, err := r.desiredWork(fdi, cluster)
	if err != nil {
		return nil, err
	}
	if got != nil {
		got = got.DeepCopy()
	}
	switch out, err := write.Ensure(ctx, r.Client, want, got); {
	case err != nil:
		return nil, fmt.Errorf("write ManifestWork %s: %w", klog.KObj(want), err)
	case out == write.Created:
		r.Recorder.Eventf(fdi, "Normal", "Distributing", "Importing the image on cluster %s", cluster)
		return want, nil
	default:
		return got, nil
	}
}

func setConditions(fdi *fleetv1alpha1.FleetDiskImage, usage Usage, notReady []string, wanted int) {
	ready := metav1.Condition{Type: fleetv1alpha1.ConditionReady, ObservedGeneration: fdi.Generation}
	switch {
	case wanted == 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonImageReady, "no FleetVirtualMachine needs the image on any cluster yet"
	case len(notReady) == 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonImageReady, fmt.Sprintf("ready on all %d clusters that need it", wanted)
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonImporting, "not ready on "+names(notReady, 10)
		for _, e := range fdi.Status.Clusters {
			if e.Phase == fleetv1alpha1.ImagePhaseFailed {
				ready.Reason = fleetv1alpha1.ReasonImageFailed
			}
		}
	}
	inUse := metav1.Condition{Type: fleetv1alpha1.ConditionInUse, ObservedGeneration: fdi.Generation}
	if usage.InUse() {
		inUse.Status, inUse.Reason, inUse.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonReferenced, usage.Summary()
	} else {
		inUse.Status, inUse.Reason, inUse.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonUnreferenced, "no VM on any cluster references the image"
	}
	meta.SetStatusCondition(&fdi.Status.Conditions, ready)
	meta.SetStatusCondition(&fdi.Status.Conditions, inUse)
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	fromWork := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		ns, name, ok := strings.Cut(o.GetAnnotations()[diskimage.AnnotationImage], "/")
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	})
	fromFVM := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		fvm, ok := o.(*fleetv1alpha1.FleetVirtualMachine)
		if !ok {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(fvm.Spec.DiskImages))
		for _, d := range fvm.Spec.DiskImages {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: fvm.Namespace, Name: d.Name}})
		}
		return reqs
	})
	prefix := "datasource:" + r.Config.ImageNamespace + "/"
	fromInventory := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		inv, ok := o.(*fleetv1alpha1.ImageInventory)
		if !ok {
			return nil
		}
		var reqs []reconcile.Request
		for _, i := range inv.Spec.Images {
			name, ok := strings.CutPrefix(i.Image, prefix)
			if !ok {
				continue
			}
			var list fleetv1alpha1.FleetDiskImageList
			if err := r.Client.List(ctx, &list, client.MatchingFields{IndexObjectName: name}); err != nil {
				continue
			}
			for _, f := range list.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&f)})
			}
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("fleetdiskimage").
		For(&fleetv1alpha1.FleetDiskImage{}).
		Watches(&workv1.ManifestWork{}, fromWork).
		Watches(&fleetv1alpha1.FleetVirtualMachine{}, fromFVM, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			fvm, ok := o.(*fleetv1alpha1.FleetVirtualMachine)
			return ok && len(fvm.Spec.DiskImages) > 0
		}))).
		Watches(&fleetv1alpha1.ImageInventory{}, fromInventory).
		Complete(write.Requeue(r))
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}
