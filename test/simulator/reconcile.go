package simulator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/fleetvm/fleetvm/pkg/vmtemplate"
)

// Reasons the simulator writes into VM conditions.
const (
	reasonUnschedulable = "Unschedulable"
	reasonFailedCreate  = "FailedCreate"
	reasonRunning       = "Running"
	reasonNotRunning    = "NotRunning"
	reasonProvisioning  = "Provisioning"
)

// errStale means the cache is behind what the simulator just wrote: try
// again shortly, it is not a failure.
var errStale = errors.New("cache behind the API server")

// Reconcile moves one VirtualMachine a step. Conflicts and a stale cache
// are retried without an error.
func (s *Simulator) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := s.reconcile(ctx, req)
	if apierrors.IsConflict(err) || errors.Is(err, errStale) {
		return ctrl.Result{Requeue: true}, nil
	}
	return res, err
}

func (s *Simulator) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := s.client.Get(ctx, req.NamespacedName, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, s.cleanupGone(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, fmt.Errorf("get VirtualMachine %s: %w", req, err)
	}
	if !vm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, s.finalize(ctx, vm)
	}
	if !controllerutil.ContainsFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer) {
		controllerutil.AddFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer)
		if err := s.client.Update(ctx, vm); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to VirtualMachine %s: %w", klog.KObj(vm), err)
		}
	}
	if patched, err := s.fillSpec(ctx, vm); err != nil || patched {
		// Patched: the VM comes back through the watch.
		return ctrl.Result{}, err
	}

	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.client.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get VirtualMachineInstance %s: %w", klog.KObj(vm), err)
		}
		vmi = nil
	}
	if vmi != nil && !metav1.IsControlledBy(vmi, vm) {
		vmi = nil
	}
	dvs, dvWait, err := s.dataVolumes(ctx, vm, startExpected(vm, vmi != nil))
	if err != nil {
		return ctrl.Result{}, err
	}

	if vmi != nil {
		if strategy, ok := afterMove(vm, vmi); ok {
			// The VM comes back through the watch.
			return ctrl.Result{}, s.setRunStrategy(ctx, vm, strategy)
		}
	}

	status := vm.Status.DeepCopy()
	if vmi == nil {
		// No instance runs an older spec.
		removeVMCondition(status, kubevirtv1.VirtualMachineRestartRequired)
	}
	var wait time.Duration
	switch {
	case RunStrategy(vm) == kubevirtv1.RunStrategyWaitAsReceiver:
		wait, err = s.receive(ctx, vm, vmi, dvs, status)
	case ShouldRun(vm, vmi != nil):
		wait, err = s.run(ctx, vm, vmi, dvs, status)
	default:
		wait, err = s.stop(ctx, vm, vmi, dvs, status)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	status.RunStrategy = RunStrategy(vm)
	if err := s.writeVMStatus(ctx, vm, status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: minPositive(wait, dvWait)}, nil
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// run moves a VM that should run towards Running.
func (s *Simulator) run(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, dvs disks, st *kubevirtv1.VirtualMachineStatus) (time.Duration, error) {
	now := metav1.NewTime(s.clock.Now())
	if vmi == nil {
		st.Created, st.Ready = false, false
		setVMCondition(st, kubevirtv1.VirtualMachineReady, corev1.ConditionFalse, reasonNotRunning, "", now)
		if !dvs.ready || st.PrintableStatus == "" {
			if want := notReady(dvs); st.PrintableStatus != want {
				st.PrintableStatus = want
				s.stepped(vm.UID)
			}
			return 0, nil
		}
		if ok, wait := s.due(vm.UID); !ok {
			return wait, nil
		}
		requests, missing, err := s.launcherRequests(ctx, vm)
		if err != nil {
			return 0, err
		}
		if missing != "" {
			// virt-controller cannot render the launcher pod.
			if st.PrintableStatus != kubevirtv1.VirtualMachineStatusStarting {
				st.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
				s.stepped(vm.UID)
			}
			setVMCondition(st, kubevirtv1.VirtualMachineFailure, corev1.ConditionTrue, reasonFailedCreate,
				"failed to render launch manifest: failed to locate network attachment definition "+missing, now)
			return 0, nil
		}
		node, err := s.pickNode(ctx, requests)
		if err != nil {
			return 0, err
		}
		if node == "" {
			if st.PrintableStatus != kubevirtv1.VirtualMachineStatusUnschedulable {
				st.PrintableStatus = kubevirtv1.VirtualMachineStatusUnschedulable
				s.stepped(vm.UID)
			}
			setVMCondition(st, kubevirtv1.VirtualMachineFailure, corev1.ConditionTrue, reasonUnschedulable,
				"no schedulable node has "+describe(requests)+" free", now)
			return 0, nil
		}
		removeVMCondition(st, kubevirtv1.VirtualMachineFailure)
		vmi, err = s.createInstance(ctx, vm, node)
		if err != nil {
			return 0, err
		}
		if err := s.ensurePod(ctx, launcherPod(vm, vmi, node, requests)); err != nil {
			return 0, err
		}
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
		st.Created = true
		s.stepped(vm.UID)
		return s.stepDelay, nil
	}

	removeVMCondition(st, kubevirtv1.VirtualMachineFailure)
	st.Created = true
	// The pod of a running instance was rendered when it started; a
	// network removed since does not take it away.
	requests, missing, err := s.launcherRequests(ctx, vm)
	if err != nil {
		return 0, err
	}
	if missing != "" {
		requests = computeRequests(vm)
	}
	if err := s.ensurePod(ctx, launcherPod(vm, vmi, vmi.Status.NodeName, requests)); err != nil {
		return 0, err
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		if ok, wait := s.due(vm.UID); !ok {
			st.PrintableStatus = kubevirtv1.VirtualMachineStatusStarting
			return wait, nil
		}
		if f := s.faults.CrashLoops; f != nil && f(vm) {
			st.PrintableStatus, st.Ready = kubevirtv1.VirtualMachineStatusCrashLoopBackOff, false
			setVMCondition(st, kubevirtv1.VirtualMachineReady, corev1.ConditionFalse, reasonNotRunning, "", now)
			return 0, nil
		}
		if err := s.startInstance(ctx, vm, vmi); err != nil {
			return 0, err
		}
		s.stepped(vm.UID)
	}
	// KubeVirt applies a changed domain only when the VM restarts
	// (vmRolloutStrategy Stage): until then the VM says RestartRequired.
	if vm.Spec.Template != nil && !apiequality.Semantic.DeepEqual(vmi.Spec.Domain, vm.Spec.Template.Spec.Domain) {
		setVMCondition(st, kubevirtv1.VirtualMachineRestartRequired, corev1.ConditionTrue, "",
			"a non-live-updatable field was changed in the template spec", now)
	} else {
		removeVMCondition(st, kubevirtv1.VirtualMachineRestartRequired)
	}
	st.PrintableStatus = kubevirtv1.VirtualMachineStatusRunning
	if ms := vmi.Status.MigrationState; ms != nil && ms.StartTimestamp != nil && !ms.Completed {
		st.PrintableStatus = kubevirtv1.VirtualMachineStatusMigrating
	}
	st.Ready = true
	setVMCondition(st, kubevirtv1.VirtualMachineReady, corev1.ConditionTrue, reasonRunning, "", now)
	return 0, nil
}

// afterMove tells the run strategy KubeVirt gives a VM once a
// decentralized migration completed: Halted for the source (its instance
// has Succeeded: the VM runs on the other cluster now), and for the
// target the strategy its kubevirt.io/restore-run-strategy annotation
// names (without one it stays WaitAsReceiver and its instance runs on).
func afterMove(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (kubevirtv1.VirtualMachineRunStrategy, bool) {
	strategy := RunStrategy(vm)
	switch {
	case migratedAway(vmi) && strategy != kubevirtv1.RunStrategyHalted:
		return kubevirtv1.RunStrategyHalted, true
	case received(vmi) && strategy == kubevirtv1.RunStrategyWaitAsReceiver:
		if restore := vm.Annotations[kubevirtv1.RestoreRunStrategy]; restore != "" {
			return kubevirtv1.VirtualMachineRunStrategy(restore), true
		}
	}
	return "", false
}

// setRunStrategy writes the VM's run strategy (and drops the legacy
// spec.running), as virt-controller updates the VM.
func (s *Simulator) setRunStrategy(ctx context.Context, vm *kubevirtv1.VirtualMachine, strategy kubevirtv1.VirtualMachineRunStrategy) error {
	patch := client.MergeFromWithOptions(vm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	vm = vm.DeepCopy()
	vm.Spec.RunStrategy, vm.Spec.Running = &strategy, nil
	if err := s.client.Patch(ctx, vm, patch); err != nil {
		return fmt.Errorf("set runStrategy %s on VirtualMachine %s: %w", strategy, klog.KObj(vm), err)
	}
	return nil
}

// receive moves a VM with runStrategy WaitAsReceiver: once its disks are
// ready it gets a receiver instance (annotated
// kubevirt.io/create-migration-target, WaitingForSync, on no node) and
// shows WaitingForReceiver; while a migration fills it, Starting then
// Migrating; once the migration completed, the instance runs like any
// other.
func (s *Simulator) receive(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, dvs disks, st *kubevirtv1.VirtualMachineStatus) (time.Duration, error) {
	if vmi != nil && received(vmi) {
		return s.run(ctx, vm, vmi, dvs, st)
	}
	now := metav1.NewTime(s.clock.Now())
	st.Ready = false
	setVMCondition(st, kubevirtv1.VirtualMachineReady, corev1.ConditionFalse, reasonNotRunning, "", now)
	removeVMCondition(st, kubevirtv1.VirtualMachineFailure)
	want := kubevirtv1.VirtualMachineStatusWaitingForReceiver
	switch {
	case vmi == nil && !dvs.ready:
		st.Created = false
		want = notReady(dvs)
	case vmi == nil:
		if ok, wait := s.due(vm.UID); !ok {
			return wait, nil
		}
		if _, err := s.createInstance(ctx, vm, ""); err != nil {
			return 0, err
		}
		st.Created = true
	case vmi.Status.Phase == kubevirtv1.WaitingForSync:
		st.Created = true
	case vmi.Status.MigrationState != nil && vmi.Status.MigrationState.StartTimestamp != nil:
		st.Created = true
		want = kubevirtv1.VirtualMachineStatusMigrating
	default:
		st.Created = true
		want = kubevirtv1.VirtualMachineStatusStarting
	}
	if st.PrintableStatus != want {
		st.PrintableStatus = want
		s.stepped(vm.UID)
	}
	return 0, nil
}

// computeRequests are the CPU and memory of the launcher pod's compute
// container.
func computeRequests(vm *kubevirtv1.VirtualMachine) corev1.ResourceList {
	requests := corev1.ResourceList{corev1.ResourceCPU: vmtemplate.CPU(vm)}
	if m, _ := vmtemplate.Memory(vm); !m.IsZero() {
		requests[corev1.ResourceMemory] = m
	}
	return requests
}

// launcherRequests are what the VM's launcher pod asks its node for: CPU,
// memory, and one of the node resource each Multus network names (as
// KubeVirt's network-resources-injector adds it). missing names the first
// network whose NetworkAttachmentDefinition does not exist.
func (s *Simulator) launcherRequests(ctx context.Context, vm *kubevirtv1.VirtualMachine) (corev1.ResourceList, string, error) {
	requests := computeRequests(vm)
	if vm.Spec.Template == nil {
		return requests, "", nil
	}
	for _, n := range vm.Spec.Template.Spec.Networks {
		if n.Multus == nil {
			continue
		}
		ns, name, ok := strings.Cut(n.Multus.NetworkName, "/")
		if !ok {
			ns, name = vm.Namespace, n.Multus.NetworkName
		}
		nad := &metav1.PartialObjectMetadata{}
		nad.SetGroupVersionKind(schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"})
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, nad); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				return nil, ns + "/" + name, nil
			}
			return nil, "", fmt.Errorf("get NetworkAttachmentDefinition %s/%s: %w", ns, name, err)
		}
		if res := nad.Annotations["k8s.v1.cni.cncf.io/resourceName"]; res != "" {
			q := requests[corev1.ResourceName(res)]
			q.Add(resource.MustParse("1"))
			requests[corev1.ResourceName(res)] = q
		}
	}
	return requests, "", nil
}

// describe renders requests for a message: "4 cpu, 8Gi memory, 1
// bridge.network.kubevirt.io/bridge2003", sorted by name.
func describe(requests corev1.ResourceList) string {
	parts := make([]string, 0, len(requests))
	for name, q := range requests {
		parts = append(parts, q.String()+" "+string(name))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// notReady is the printableStatus of a VM to start without an instance
// whose disks are not ready: DataVolumeError when one failed, else
// WaitingForVolumeBinding while all of them wait for their first
// consumer (their claims Pending until the provisioning pod binds them),
// else Provisioning. KubeVirt ranks DataVolumeError above Provisioning,
// above WaitingForVolumeBinding, above Starting and Stopped.
func notReady(dvs disks) kubevirtv1.VirtualMachinePrintableStatus {
	switch {
	case dvs.failed:
		return kubevirtv1.VirtualMachineStatusDataVolumeError
	case dvs.unbound:
		return kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding
	}
	return kubevirtv1.VirtualMachineStatusProvisioning
}

// stop moves a VM that should not run towards Stopped: Provisioning (or
// DataVolumeError) instead while its disks are not ready, as KubeVirt
// shows a stopped VM whose DataVolumes import. DataVolumes that wait for
// their first consumer import nothing until the VM starts: KubeVirt shows
// the VM Stopped (their claims are not Bound, so nothing provisions, and
// a VM not asked to start does not wait for volume binding).
func (s *Simulator) stop(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, dvs disks, st *kubevirtv1.VirtualMachineStatus) (time.Duration, error) {
	now := metav1.NewTime(s.clock.Now())
	st.Ready = false
	setVMCondition(st, kubevirtv1.VirtualMachineReady, corev1.ConditionFalse, reasonNotRunning, "", now)
	removeVMCondition(st, kubevirtv1.VirtualMachineFailure)
	gone, err := s.deleteInstance(ctx, vm, vmi)
	if err != nil {
		return 0, err
	}
	if !gone {
		if st.PrintableStatus != kubevirtv1.VirtualMachineStatusStopping {
			st.PrintableStatus = kubevirtv1.VirtualMachineStatusStopping
			s.stepped(vm.UID)
		}
		return s.stepDelay, nil
	}
	st.Created = false
	if st.PrintableStatus == kubevirtv1.VirtualMachineStatusStopping {
		if ok, wait := s.due(vm.UID); !ok {
			return wait, nil
		}
	}
	want := kubevirtv1.VirtualMachineStatusStopped
	if !dvs.ready && !dvs.unbound {
		want = notReady(dvs)
	}
	if st.PrintableStatus != want {
		st.PrintableStatus = want
		s.stepped(vm.UID)
	}
	return 0, nil
}

// pickNode returns the first schedulable node, by name, with room for the
// requests, or "" when none has room.
func (s *Simulator) pickNode(ctx context.Context, requests corev1.ResourceList) (string, error) {
	var nodes corev1.NodeList
	if err := s.client.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods); err != nil {
		return "", fmt.Errorf("list pods: %w", err)
	}
	all := slices.Concat(pods.Items, s.assumedPods(pods.Items))
	for _, f := range sortedByName(roomByNode(nodes.Items, all), func(f nodeRoom) string { return f.Node }) {
		if f.fits(requests) {
			return f.Node, nil
		}
	}
	return "", nil
}

// assumedPods returns the pods the simulator created that the cache does
// not show yet, and forgets those it shows or that are old.
func (s *Simulator) assumedPods(seen []corev1.Pod) []corev1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range seen {
		delete(s.assumed, nn(&p))
	}
	var out []corev1.Pod
	for k, a := range s.assumed {
		if s.clock.Since(a.at) > time.Minute {
			delete(s.assumed, k)
			continue
		}
		out = append(out, a.pod)
	}
	return out
}

func (s *Simulator) assume(p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.assumed[nn(p)] = assumedPod{pod: *p.DeepCopy(), at: s.clock.Now()}
}

// createInstance creates the VM's instance, scheduled on node, or, with
// no node, the receiver instance of a VM that waits as a receiver.
func (s *Simulator) createInstance(ctx context.Context, vm *kubevirtv1.VirtualMachine, node string) (*kubevirtv1.VirtualMachineInstance, error) {
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       vm.Namespace,
			Name:            vm.Name,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)},
		},
	}
	if vm.Spec.Template != nil {
		vmi.Labels = vm.Spec.Template.ObjectMeta.Labels
		vmi.Annotations = maps.Clone(vm.Spec.Template.ObjectMeta.Annotations)
		vmi.Spec = *vm.Spec.Template.Spec.DeepCopy()
	}
	if vmi.Labels == nil {
		vmi.Labels = map[string]string{}
	}
	vmi.Labels[kubevirtv1.VirtualMachineLabel] = vm.Name
	// The VM's generation the instance was made from, as KubeVirt's VM
	// controller records it.
	if vmi.Annotations == nil {
		vmi.Annotations = map[string]string{}
	}
	vmi.Annotations[kubevirtv1.VirtualMachineGenerationAnnotation] = strconv.FormatInt(vm.Generation, 10)
	status := kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduled, NodeName: node}
	if node == "" {
		vmi.Annotations[kubevirtv1.CreateMigrationTarget] = "true"
		status = kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.WaitingForSync}
	}
	vmi.Status = status
	if err := s.client.Create(ctx, vmi); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create VirtualMachineInstance %s: %w", klog.KObj(vm), err)
		}
		return nil, fmt.Errorf("VirtualMachineInstance %s exists: %w", klog.KObj(vm), errStale)
	}
	if !apiequality.Semantic.DeepEqual(vmi.Status, status) {
		vmi.Status = status
		if err := s.writeStatus(ctx, vmi, "virtualmachineinstances"); err != nil {
			return nil, err
		}
	}
	return vmi, nil
}

// startInstance marks the instance Running with an address.
func (s *Simulator) startInstance(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) error {
	now := metav1.NewTime(s.clock.Now())
	ip := InstanceIP(vm.UID)
	vmi = vmi.DeepCopy()
	vmi.Status.Phase = kubevirtv1.Running
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{
		Name: "default", IP: ip, IPs: []string{ip}, InterfaceName: "eth0",
	}}
	vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: now,
	}}
	return s.writeStatus(ctx, vmi, "virtualmachineinstances")
}

// ensurePod creates the instance's virt-launcher pod, Running on the
// instance's node, unless it exists.
func (s *Simulator) ensurePod(ctx context.Context, pod *corev1.Pod) error {
	if err := s.client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get pod %s: %w", klog.KObj(pod), err)
	}
	if err := s.client.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("create pod %s: %w", klog.KObj(pod), err)
	}
	s.assume(pod)
	pod.Status.Phase = corev1.PodRunning
	if err := s.client.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("mark pod %s Running: %w", klog.KObj(pod), err)
	}
	return nil
}

// deleteInstance deletes the VM's instance and launcher pods; it tells
// whether they are gone (as far as the cache knows).
func (s *Simulator) deleteInstance(ctx context.Context, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) (bool, error) {
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods, client.InNamespace(vm.Namespace), client.MatchingLabels{LabelVMName: vm.Name}); err != nil {
		return false, fmt.Errorf("list pods of VirtualMachine %s: %w", klog.KObj(vm), err)
	}
	gone := vmi == nil && len(pods.Items) == 0
	for i := range pods.Items {
		// No kubelet confirms a graceful deletion here: delete at once.
		if err := s.client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete pod %s: %w", klog.KObj(&pods.Items[i]), err)
		}
		s.mu.Lock()
		delete(s.assumed, nn(&pods.Items[i]))
		s.mu.Unlock()
	}
	if vmi != nil {
		if err := s.client.Delete(ctx, vmi); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete VirtualMachineInstance %s: %w", klog.KObj(vmi), err)
		}
	}
	return gone, nil
}

// finalize cleans up after a deleted VM and lets it go.
func (s *Simulator) finalize(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	if err := s.cleanupGone(ctx, vm.Namespace, vm.Name); err != nil {
		return err
	}
	var dvs cdiv1beta1.DataVolumeList
	if err := s.client.List(ctx, &dvs, client.InNamespace(vm.Namespace)); err != nil {
		return fmt.Errorf("list DataVolumes of VirtualMachine %s: %w", klog.KObj(vm), err)
	}
	for i := range dvs.Items {
		if metav1.IsControlledBy(&dvs.Items[i], vm) {
			if err := s.client.Delete(ctx, &dvs.Items[i]); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete DataVolume %s: %w", klog.KObj(&dvs.Items[i]), err)
			}
			s.forget(dvs.Items[i].UID)
		}
	}
	s.forget(vm.UID)
	if controllerutil.RemoveFinalizer(vm, kubevirtv1.VirtualMachineControllerFinalizer) {
		if err := s.client.Update(ctx, vm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove finalizer from VirtualMachine %s: %w", klog.KObj(vm), err)
		}
	}
	return nil
}

// cleanupGone deletes the instance and launcher pods of a VM that is gone
// (envtest runs no garbage collector).
func (s *Simulator) cleanupGone(ctx context.Context, namespace, name string) error {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vmi); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get VirtualMachineInstance %s/%s: %w", namespace, name, err)
		}
		vmi = nil
	}
	_, err := s.deleteInstance(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, vmi)
	return err
}

func setVMCondition(st *kubevirtv1.VirtualMachineStatus, t kubevirtv1.VirtualMachineConditionType, status corev1.ConditionStatus, reason, message string, now metav1.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, message
		return
	}
	st.Conditions = append(st.Conditions, kubevirtv1.VirtualMachineCondition{
		Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: now,
	})
}

func removeVMCondition(st *kubevirtv1.VirtualMachineStatus, t kubevirtv1.VirtualMachineConditionType) {
	out := st.Conditions[:0]
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}
