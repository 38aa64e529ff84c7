package vmstatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	agentcapacity "github.com/fleetvm/fleetvm/pkg/agent/capacity"
	"github.com/fleetvm/fleetvm/pkg/agent/inventory"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// Reconciler writes one VMReport per FleetVirtualMachine. Requests name
// the FleetVirtualMachine (its namespace and name), not a VM.
type Reconciler struct {
	// Spoke reads VMs, instances and DataVolumes (a cached client).
	Spoke client.Reader
	// Hub writes VMReports in Namespace.
	Hub client.Client
	// Namespace is the cluster namespace on the hub (the cluster's name).
	Namespace string

	// expect holds the reports this agent just wrote until the hub cache
	// shows them: a reconcile that compared against the older copy would
	// send the same report again.
	expect write.Expectations
}

// Reconcile rebuilds the report of one FleetVirtualMachine (its VMs in its
// own namespace) and writes it if it differs from the hub's copy; deletes
// it when no VM is left.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ref := fleetv1alpha1.FleetVMReference{Namespace: req.Namespace, Name: req.Name}
	// FleetVM delivers a FleetVirtualMachine's VM only into its own
	// namespace: a VM elsewhere that carries its labels (anyone with
	// rights in another namespace can set them) is not its VM, and its
	// node and addresses are not reported as such.
	var vms kubevirtv1.VirtualMachineList
	if err := r.Spoke.List(ctx, &vms, client.InNamespace(ref.Namespace), client.MatchingLabels{
		fleetv1alpha1.LabelFleetVMNamespace: ref.Namespace, fleetv1alpha1.LabelFleetVMName: ref.Name,
	}); err != nil {
		return reconcile.Result{}, fmt.Errorf("list VirtualMachines of FleetVM %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	nets, err := agentcapacity.ReadNetworks(ctx, r.Spoke)
	if err != nil {
		return reconcile.Result{}, err
	}
	states := make([]fleetv1alpha1.VMState, 0, len(vms.Items))
	for i := range vms.Items {
		vm := &vms.Items[i]
		if !vm.DeletionTimestamp.IsZero() {
			continue
		}
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := r.Spoke.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
			if !apierrors.IsNotFound(err) {
				return reconcile.Result{}, fmt.Errorf("get VirtualMachineInstance %s: %w", client.ObjectKeyFromObject(vm), err)
			}
			vmi = nil
		}
		st := State(vm, vmi, inventory.ImagesOf(vm, r.lookup(ctx)), MissingNetworks(vm, nets))
		if st.DataVolumes, err = r.dataVolumesOf(ctx, vm); err != nil {
			return reconcile.Result{}, err
		}
		states = append(states, st)
	}

	key := client.ObjectKey{Namespace: r.Namespace, Name: ReportName(ref)}
	report := &fleetv1alpha1.VMReport{}
	err = r.Hub.Get(ctx, key, report)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("get VMReport %s: %w", key, err)
	}
	exists := err == nil
	seen := client.Object(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	if exists {
		seen = report
	}
	if !r.expect.Satisfied(seen) {
		// The hub cache has not caught up with this agent's last write of
		// the report; the watch event of that write brings the next
		// reconcile (the requeue is a backstop).
		return reconcile.Result{RequeueAfter: write.ExpectationTimeout}, nil
	}
	if len(states) == 0 {
		if exists {
			if err := r.Hub.Delete(ctx, report); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("delete VMReport %s: %w", key, err)
			}
			r.expect.Forget(key)
		}
		return reconcile.Result{}, nil
	}
	want := &fleetv1alpha1.VMReport{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: r.labels(ref)},
		Spec:       Spec(ref, states),
	}
	if !exists {
		report = nil
	}
	switch out, err := write.Ensure(ctx, r.Hub, want, report); {
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("write VMReport %s: %w", key, err)
	case out == write.Created:
		r.expect.Wrote(want)
	case out == write.Updated:
		r.expect.Wrote(report)
	}
	return reconcile.Result{}, nil
}

func (r *Reconciler) labels(ref fleetv1alpha1.FleetVMReference) map[string]string {
	return map[string]string{
		fleetv1alpha1.LabelFleetVMName:      ref.Name,
		fleetv1alpha1.LabelFleetVMNamespace: ref.Namespace,
		fleetv1alpha1.LabelCluster:          r.Namespace,
		fleetv1alpha1.LabelPartOf:           fleetv1alpha1.PartOfValue,
	}
}

// lookup finds DataVolumes a VM uses that are not its own templates.
func (r *Reconciler) lookup(ctx context.Context) inventory.LookupDataVolume {
	return func(ns, name string) (*cdiv1beta1.DataVolume, bool) {
		dv := &cdiv1beta1.DataVolume{}
		if err := r.Spoke.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, dv); err != nil {
			return nil, false
		}
		return dv, true
	}
}

// dataVolumesOf reads the state of the VM's template DataVolumes; a
// DataVolume the cache cannot read is an error, not a missing one.
func (r *Reconciler) dataVolumesOf(ctx context.Context, vm *kubevirtv1.VirtualMachine) (fleetv1alpha1.DataVolumesState, error) {
	var errs []error
	st := DataVolumesOf(vm, func(ns, name string) (*cdiv1beta1.DataVolume, bool) {
		dv := &cdiv1beta1.DataVolume{}
		if err := r.Spoke.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, dv); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("get DataVolume %s/%s of VirtualMachine %s: %w", ns, name, klog.KObj(vm), err))
			}
			return nil, false
		}
		return dv, true
	})
	return st, errors.Join(errs...)
}

// fleetVMsOfDataVolume maps a DataVolume to the FleetVirtualMachine of its
// VM: the VirtualMachine that owns it, else the VMs of its namespace whose
// dataVolumeTemplates name it (KubeVirt adopts an orphan of that name).
func (r *Reconciler) fleetVMsOfDataVolume(ctx context.Context, o client.Object) []reconcile.Request {
	gvk := kubevirtv1.VirtualMachineGroupVersionKind
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind != gvk.Kind || !strings.HasPrefix(ref.APIVersion, gvk.Group+"/") {
			continue
		}
		vm := &kubevirtv1.VirtualMachine{}
		if err := r.Spoke.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, vm); err != nil {
			return nil
		}
		if ref, ok := FleetVMOf(vm.Labels); ok {
			return []reconcile.Request{request(ref)}
		}
		return nil
	}
	var vms kubevirtv1.VirtualMachineList
	if err := r.Spoke.List(ctx, &vms, client.InNamespace(o.GetNamespace()), client.HasLabels{fleetv1alpha1.LabelFleetVMName}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range vms.Items {
		vm := &vms.Items[i]
		ref, ok := FleetVMOf(vm.Labels)
		if !ok || slices.Contains(out, request(ref)) {
			continue
		}
		if slices.ContainsFunc(vm.Spec.DataVolumeTemplates, func(t kubevirtv1.DataVolumeTemplateSpec) bool { return t.Name == o.GetName() }) {
			out = append(out, request(ref))
		}
	}
	return out
}

// dataVolumeStateChanged lets through the DataVolume events that can
// change a report: creations, deletions, and updates of phase, owners or
// deletion (not every step of an import's progress).
var dataVolumeStateChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldDV, okOld := e.ObjectOld.(*cdiv1beta1.DataVolume)
		newDV, okNew := e.ObjectNew.(*cdiv1beta1.DataVolume)
		if !okOld || !okNew {
			return true
		}
		return oldDV.Status.Phase != newDV.Status.Phase ||
			oldDV.DeletionTimestamp.IsZero() != newDV.DeletionTimestamp.IsZero() ||
			!equality.Semantic.DeepEqual(oldDV.OwnerReferences, newDV.OwnerReferences)
	},
}

func request(ref fleetv1alpha1.FleetVMReference) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}
}

// SetupWithManager watches VMs, instances and DataVolumes on the spoke
// (the manager's cache) and VMReports on the hub.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, hub cluster.Cluster) error {
	byLabels := func(_ context.Context, o client.Object) []reconcile.Request {
		if ref, ok := FleetVMOf(o.GetLabels()); ok {
			return []reconcile.Request{request(ref)}
		}
		return nil
	}
	vmiToFleetVM := func(ctx context.Context, o client.Object) []reconcile.Request {
		vm := &kubevirtv1.VirtualMachine{}
		if err := r.Spoke.Get(ctx, client.ObjectKeyFromObject(o), vm); err != nil {
			return nil
		}
		return byLabels(ctx, vm)
	}
	reportToFleetVM := func(ctx context.Context, o client.Object) []reconcile.Request {
		if o.GetNamespace() != r.Namespace {
			return nil
		}
		return byLabels(ctx, o)
	}
	// A network appearing or going away changes the reports of the VMs
	// that attach to it: every FleetVM with VMs here is looked at again.
	everyFleetVM := func(ctx context.Context, _ client.Object) []reconcile.Request {
		var vms kubevirtv1.VirtualMachineList
		if err := r.Spoke.List(ctx, &vms, client.HasLabels{fleetv1alpha1.LabelFleetVMName}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range vms.Items {
			if ref, ok := FleetVMOf(vms.Items[i].Labels); ok && !slices.Contains(out, request(ref)) {
				out = append(out, request(ref))
			}
		}
		return out
	}
	err := agentcapacity.WatchNetworks(mgr, ctrl.NewControllerManagedBy(mgr), handler.EnqueueRequestsFromMapFunc(everyFleetVM)).
		Named("fleetvm-vmstatus").
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&kubevirtv1.VirtualMachine{}), handler.EnqueueRequestsFromMapFunc(byLabels))).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&kubevirtv1.VirtualMachineInstance{}), handler.EnqueueRequestsFromMapFunc(vmiToFleetVM))).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&cdiv1beta1.DataVolume{}), handler.EnqueueRequestsFromMapFunc(r.fleetVMsOfDataVolume), dataVolumeStateChanged)).
		WatchesRawSource(source.Kind(hub.GetCache(), client.Object(&fleetv1alpha1.VMReport{}), handler.EnqueueRequestsFromMapFunc(reportToFleetVM))).
		Complete(write.Requeue(r))
	if err != nil {
		return fmt.Errorf("set up VM status controller: %w", err)
	}
	return nil
}
