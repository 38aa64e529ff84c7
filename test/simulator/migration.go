package simulator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// KubeVirt 1.7's decentralized live migration moves a running VM to
// another namespace or cluster. Two VirtualMachineInstanceMigrations play
// it: on the source cluster one with spec.sendTo (migrationID, and the
// connectURL of the target cluster's synchronization controller), on the
// target cluster one with spec.receive (the same migrationID), whose
// spec.vmiName is the receiver instance KubeVirt made for a VM with
// runStrategy WaitAsReceiver. The two clusters' synchronization
// controllers exchange the instances' migration state; the source
// migration walks Synchronizing → Pending → Scheduling → Scheduled →
// PreparingTarget → TargetReady → Running → Succeeded, the target one
// WaitingForSync → Pending → Scheduling → … → Succeeded. Then the source
// instance has Succeeded and KubeVirt halts the source VM; the receiver
// instance runs and the target VM takes the run strategy its
// kubevirt.io/restore-run-strategy annotation names. A failed migration
// is not retried: the source keeps running, the receiver goes back to
// WaitingForSync with its migration state Failed, and the target VM is
// left not running.
//
// KubeVirt copies the VM's disks to the target's volumes as it migrates
// (block migration). The simulator carries the data marker instead: the
// source side tells the target the DataAnnotation of each claim its
// instance's DataVolume and PersistentVolumeClaim volumes name, and when
// the target migration succeeds, the target VM's claims of the same names
// get it, before the receiver instance says the migration completed. A
// failed migration carries nothing.
//
// The simulator plays both clusters' side with one migrationReconciler
// each. What their synchronization controllers would say over the network
// goes through a SyncNetwork the test fleet shares between its spokes'
// simulators: a stand-in, since a simulator sees only its own API server.
// Simplified: only the data marker is copied (no size, format or volume
// mode is checked, and claims pair up by name), no synchronization
// controller connection or TLS is checked (a connectURL matches a cluster's
// Options.SyncAddress exactly), local (non-decentralized) migrations and
// cancellation by deleting a migration are not played, and each side
// waits for the other by polling the SyncNetwork.

// peerPoll is how often a migration waiting for the other side looks again.
const peerPoll = 200 * time.Millisecond

// SyncNetwork stands in for the network between KubeVirt's
// synchronization controllers of different clusters: each side of a
// decentralized migration publishes its state under the target cluster's
// synchronization address and the migrationID, and reads the other
// side's. Share one between the simulators of a test fleet's spokes; each
// simulator without one gets its own, which serves migrations between
// namespaces of its cluster. Safe for concurrent use.
type SyncNetwork struct {
	mu    sync.Mutex
	sides map[syncKey]migrationSide
}

// NewSyncNetwork returns an empty SyncNetwork.
func NewSyncNetwork() *SyncNetwork {
	return &SyncNetwork{sides: map[syncKey]migrationSide{}}
}

type syncKey struct {
	// address is the target cluster's synchronization address.
	address     string
	migrationID string
	target      bool
}

// migrationSide is what one side's synchronization controller tells the
// other.
type migrationSide struct {
	migrationUID types.UID
	vmiUID       types.UID
	phase        kubevirtv1.VirtualMachineInstanceMigrationPhase
	node, pod    string
	// start is when the source started sending.
	start *metav1.Time
	// data is what the source's disks hold, which the block migration
	// copies: claim name → DataAnnotation, the non-empty ones (none for
	// the target side). Never changed once published.
	data map[string]string
}

// publish records a side's state. A side never moves back: a pass that
// read its migration before the last write publishes nothing older.
func (n *SyncNetwork) publish(k syncKey, side migrationSide) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.sides[k]; ok && old.migrationUID == side.migrationUID && phaseRank(old.phase) > phaseRank(side.phase) {
		return
	}
	n.sides[k] = side
}

// phaseRank orders a decentralized migration's phases, the final ones last.
func phaseRank(p kubevirtv1.VirtualMachineInstanceMigrationPhase) int {
	switch p {
	case kubevirtv1.MigrationSynchronizing, kubevirtv1.MigrationWaitingForSync:
		return 1
	case kubevirtv1.MigrationPending:
		return 2
	case kubevirtv1.MigrationScheduling:
		return 3
	case kubevirtv1.MigrationScheduled:
		return 4
	case kubevirtv1.MigrationPreparingTarget:
		return 5
	case kubevirtv1.MigrationTargetReady:
		return 6
	case kubevirtv1.MigrationRunning:
		return 7
	case kubevirtv1.MigrationSucceeded, kubevirtv1.MigrationFailed:
		return 8
	}
	return 0
}

// peer returns what the other side of k published.
func (n *SyncNetwork) peer(k syncKey) (migrationSide, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k.target = !k.target
	side, ok := n.sides[k]
	return side, ok
}

// migrationReconciler plays, for decentralized migrations, KubeVirt's
// migration controller, virt-handler and synchronization controller.
type migrationReconciler struct{ *Simulator }

// migrationView is what one pass over a migration knows.
type migrationView struct {
	target bool
	phase  kubevirtv1.VirtualMachineInstanceMigrationPhase
	// vmi tells whether the migration's instance exists and, for a
	// target, whether it is a receiver; running whether a source's runs.
	vmi, receiver, running bool
	// peer is the other side, nil until it has published.
	peer *migrationSide
	// targetPod: the target's virt-launcher pod exists.
	targetPod bool
	// failsHalfway: Faults.MigrationFailsHalfway.
	failsHalfway bool
	// done and failed: the instance's migration state says this migration
	// completed or failed (failure its reason), whatever phase the
	// migration shows: the instance is written first, so a pass that
	// reads the migration before its last write catches up from there.
	done, failed bool
	failure      string
}

// nextMigrationPhase decides a migration's next phase, and the failure
// reason when it fails.
func nextMigrationPhase(v migrationView) (kubevirtv1.VirtualMachineInstanceMigrationPhase, string) {
	p := v.peer
	switch {
	case v.failed:
		return kubevirtv1.MigrationFailed, v.failure
	case v.done:
		return kubevirtv1.MigrationSucceeded, ""
	case !v.vmi:
		return kubevirtv1.MigrationFailed, "Migration failed because vmi does not exist."
	case v.target && !v.receiver:
		return kubevirtv1.MigrationFailed, "The target VMI is not a receiver (runStrategy WaitAsReceiver)."
	case !v.target && !v.running && v.phase != kubevirtv1.MigrationPhaseUnset && v.phase != kubevirtv1.MigrationSynchronizing &&
		v.phase != kubevirtv1.MigrationPending:
		return kubevirtv1.MigrationFailed, "Migration failed vmi shutdown during migration."
	case p != nil && p.phase == kubevirtv1.MigrationFailed:
		return kubevirtv1.MigrationFailed, "The other side of the migration failed."
	}
	phaseAtLeast := func(side *migrationSide, phases ...kubevirtv1.VirtualMachineInstanceMigrationPhase) bool {
		if side == nil {
			return false
		}
		for _, ph := range phases {
			if side.phase == ph {
				return true
			}
		}
		return false
	}
	if v.target {
		switch v.phase {
		case kubevirtv1.MigrationPhaseUnset:
			return kubevirtv1.MigrationWaitingForSync, ""
		case kubevirtv1.MigrationWaitingForSync:
			if p != nil {
				return kubevirtv1.MigrationPending, ""
			}
		case kubevirtv1.MigrationPending:
			if v.targetPod {
				return kubevirtv1.MigrationScheduling, ""
			}
		case kubevirtv1.MigrationScheduling:
			return kubevirtv1.MigrationScheduled, ""
		case kubevirtv1.MigrationScheduled:
			return kubevirtv1.MigrationPreparingTarget, ""
		case kubevirtv1.MigrationPreparingTarget:
			return kubevirtv1.MigrationTargetReady, ""
		case kubevirtv1.MigrationTargetReady:
			if p != nil && p.start != nil {
				return kubevirtv1.MigrationRunning, ""
			}
		case kubevirtv1.MigrationRunning:
			if phaseAtLeast(p, kubevirtv1.MigrationSucceeded) {
				return kubevirtv1.MigrationSucceeded, ""
			}
		}
		return v.phase, ""
	}
	switch v.phase {
	case kubevirtv1.MigrationPhaseUnset:
		return kubevirtv1.MigrationSynchronizing, ""
	case kubevirtv1.MigrationSynchronizing:
		if p != nil {
			return kubevirtv1.MigrationPending, ""
		}
	case kubevirtv1.MigrationPending:
		if v.running {
			return kubevirtv1.MigrationScheduling, ""
		}
	case kubevirtv1.MigrationScheduling:
		if p != nil && p.pod != "" {
			return kubevirtv1.MigrationScheduled, ""
		}
	case kubevirtv1.MigrationScheduled:
		if p != nil && p.pod != "" && p.node != "" {
			return kubevirtv1.MigrationPreparingTarget, ""
		}
	case kubevirtv1.MigrationPreparingTarget:
		if phaseAtLeast(p, kubevirtv1.MigrationTargetReady, kubevirtv1.MigrationRunning) {
			return kubevirtv1.MigrationTargetReady, ""
		}
	case kubevirtv1.MigrationTargetReady:
		return kubevirtv1.MigrationRunning, ""
	case kubevirtv1.MigrationRunning:
		// Both sides run the migration: it ends here, one way or the other.
		if phaseAtLeast(p, kubevirtv1.MigrationRunning) {
			if v.failsHalfway {
				return kubevirtv1.MigrationFailed, "Live migration failed: the simulator's MigrationFailsHalfway fault"
			}
			return kubevirtv1.MigrationSucceeded, ""
		}
	}
	return v.phase, ""
}

// Reconcile moves one decentralized migration a step.
func (r migrationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &kubevirtv1.VirtualMachineInstanceMigration{}
	if err := r.client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.IsDecentralized() || m.IsFinal() || !m.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	res, err := r.reconcile(ctx, m)
	if apierrors.IsConflict(err) || errors.Is(err, errStale) {
		return ctrl.Result{Requeue: true}, nil
	}
	return res, err
}

func (r migrationReconciler) syncKey(m *kubevirtv1.VirtualMachineInstanceMigration) syncKey {
	if m.Spec.SendTo != nil {
		return syncKey{address: m.Spec.SendTo.ConnectURL, migrationID: m.Spec.SendTo.MigrationID}
	}
	return syncKey{address: r.syncAddress, migrationID: m.Spec.Receive.MigrationID, target: true}
}

func (r migrationReconciler) reconcile(ctx context.Context, m *kubevirtv1.VirtualMachineInstanceMigration) (ctrl.Result, error) {
	if ok, wait := r.due(m.UID); !ok {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	key := r.syncKey(m)
	v := migrationView{target: key.target, phase: m.Status.Phase}
	if peer, ok := r.network.peer(key); ok {
		v.peer = &peer
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.VMIName}, vmi); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get VirtualMachineInstance of migration %s: %w", klog.KObj(m), err)
		}
		vmi = nil
	}
	if vmi != nil {
		v.vmi, v.receiver, v.running = true, vmi.IsMigrationTarget(), vmi.Status.Phase == kubevirtv1.Running
		if ms := vmi.Status.MigrationState; ms != nil && ms.MigrationUID == m.UID && ms.Completed {
			v.done, v.failed, v.failure = !ms.Failed, ms.Failed, ms.FailureReason
		}
	}
	if f := r.faults.MigrationFailsHalfway; f != nil {
		v.failsHalfway = f(key.migrationID)
	}
	// Read before this pass writes anything, so that the pass completing
	// the source side publishes its data with Succeeded (a final
	// migration is not reconciled again, so it publishes nothing later).
	var data map[string]string
	if !key.target && vmi != nil {
		var err error
		if data, err = r.sourceData(ctx, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	if v.target && v.vmi && v.receiver && m.Status.Phase == kubevirtv1.MigrationPending && v.peer != nil {
		var err error
		if v.targetPod, err = r.ensureTargetPod(ctx, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	next, failure := nextMigrationPhase(v)
	if next == m.Status.Phase {
		r.publish(m, key, vmi, data)
		return ctrl.Result{RequeueAfter: max(peerPoll, r.stepDelay)}, nil
	}
	// A target migration writes only into a receiver (or the instance it
	// received into); the instance's state is written before the
	// migration's.
	if vmi != nil && (!key.target || v.receiver || v.done || v.failed) {
		var err error
		if vmi, err = r.stepInstance(ctx, m, key, vmi, v.peer, next, failure); err != nil {
			return ctrl.Result{}, err
		}
	}
	m = m.DeepCopy()
	m.Status.Phase = next
	m.Status.PhaseTransitionTimestamps = append(m.Status.PhaseTransitionTimestamps, kubevirtv1.VirtualMachineInstanceMigrationPhaseTransitionTimestamp{
		Phase: next, PhaseTransitionTimestamp: metav1.NewTime(r.clock.Now()),
	})
	if r.syncAddress != "" {
		m.Status.SynchronizationAddresses = []string{r.syncAddress}
	}
	if vmi != nil && vmi.Status.MigrationState != nil {
		m.Status.MigrationState = vmi.Status.MigrationState.DeepCopy()
	}
	if m.Status.MigrationState == nil && failure != "" {
		m.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{}
	}
	if failure != "" {
		m.Status.MigrationState.Failed, m.Status.MigrationState.FailureReason = true, failure
	}
	if err := r.writeStatus(ctx, m, "virtualmachineinstancemigrations"); err != nil {
		return ctrl.Result{}, err
	}
	r.stepped(m.UID)
	r.publish(m, key, vmi, data)
	return ctrl.Result{RequeueAfter: max(peerPoll, r.stepDelay)}, nil
}

// publish tells the other side where this one is and, for the source,
// what its disks hold.
func (r migrationReconciler) publish(m *kubevirtv1.VirtualMachineInstanceMigration, key syncKey, vmi *kubevirtv1.VirtualMachineInstance, data map[string]string) {
	side := migrationSide{migrationUID: m.UID, phase: m.Status.Phase, data: data}
	if vmi != nil {
		side.vmiUID = vmi.UID
		if ms := vmi.Status.MigrationState; ms != nil && ms.MigrationUID == m.UID {
			side.start = ms.StartTimestamp
			switch {
			case key.target && ms.TargetState != nil:
				side.node, side.pod = ms.TargetState.Node, ms.TargetState.Pod
			case !key.target && ms.SourceState != nil:
				side.node, side.pod = ms.SourceState.Node, ms.SourceState.Pod
			}
		}
	}
	r.network.publish(key, side)
}

// stepInstance writes into the migration's instance what KubeVirt's
// components write there at the migration's next phase.
func (r migrationReconciler) stepInstance(ctx context.Context, m *kubevirtv1.VirtualMachineInstanceMigration, key syncKey, vmi *kubevirtv1.VirtualMachineInstance, peer *migrationSide, next kubevirtv1.VirtualMachineInstanceMigrationPhase, failure string) (*kubevirtv1.VirtualMachineInstance, error) {
	if ms := vmi.Status.MigrationState; ms != nil && ms.MigrationUID == m.UID && ms.Completed {
		return vmi, nil // written by an earlier pass
	}
	now := metav1.NewTime(r.clock.Now())
	before := vmi
	vmi = vmi.DeepCopy()
	ms := vmi.Status.MigrationState
	if ms == nil || (ms.Completed && ms.MigrationUID != m.UID) {
		ms = &kubevirtv1.VirtualMachineInstanceMigrationState{}
		vmi.Status.MigrationState = ms
	}
	if ms.SourceState == nil {
		ms.SourceState = &kubevirtv1.VirtualMachineInstanceMigrationSourceState{}
	}
	if ms.TargetState == nil {
		ms.TargetState = &kubevirtv1.VirtualMachineInstanceMigrationTargetState{}
	}
	ms.MigrationUID = m.UID
	// The synchronization controllers copy each side's state into the
	// other's instance.
	own, other := &ms.SourceState.VirtualMachineInstanceCommonMigrationState, &ms.TargetState.VirtualMachineInstanceCommonMigrationState
	if key.target {
		own, other = other, own
	}
	own.MigrationUID, own.VirtualMachineInstanceUID = m.UID, &vmi.UID
	if !key.target {
		ms.TargetState.SyncAddress = &key.address
		own.Node, own.Pod = vmi.Status.NodeName, LauncherPodName(vmi.Name, vmi.UID)
		ms.SourceNode, ms.SourcePod = own.Node, own.Pod
		ms.SourceState.NodeSelectors = map[string]string{corev1.LabelHostname: vmi.Status.NodeName}
	}
	if peer != nil {
		other.MigrationUID, other.VirtualMachineInstanceUID = peer.migrationUID, &peer.vmiUID
		other.Node, other.Pod = peer.node, peer.pod
		if !key.target {
			ms.TargetNode, ms.TargetPod = peer.node, peer.pod
		}
	}
	annotationsChanged := false
	switch {
	case next == kubevirtv1.MigrationFailed:
		ms.Completed, ms.Failed, ms.FailureReason, ms.EndTimestamp = true, true, failure, &now
		if key.target {
			// KubeVirt deletes the receiver's pod; the receiver waits again.
			if err := r.deleteLauncherPods(ctx, vmi); err != nil {
				return nil, err
			}
			vmi.Status.Phase, vmi.Status.NodeName = kubevirtv1.WaitingForSync, ""
		}
	case key.target && next == kubevirtv1.MigrationScheduling:
		vmi.Status.Phase = kubevirtv1.Scheduling
		own.Pod = LauncherPodName(vmi.Name, vmi.UID)
		ms.TargetPod = own.Pod
	case key.target && next == kubevirtv1.MigrationScheduled:
		pod := &corev1.Pod{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: LauncherPodName(vmi.Name, vmi.UID)}, pod); err != nil {
			return nil, fmt.Errorf("get target pod of migration %s: %w", klog.KObj(m), err)
		}
		vmi.Status.Phase, vmi.Status.NodeName = kubevirtv1.Scheduled, pod.Spec.NodeName
		own.Node, ms.TargetNode = pod.Spec.NodeName, pod.Spec.NodeName
	case key.target && next == kubevirtv1.MigrationTargetReady:
		addr := InstanceIP(vmi.UID)
		ms.TargetState.NodeAddress, ms.TargetNodeAddress = &addr, addr
	case key.target && next == kubevirtv1.MigrationRunning:
		ms.StartTimestamp = peer.start
	case key.target && next == kubevirtv1.MigrationSucceeded:
		// The block migration has copied the source's disks: their data
		// is on the target's claims before the instance says the
		// migration completed (a pass that finds it completed writes
		// nothing more).
		if peer != nil {
			if err := r.receiveData(ctx, vmi, peer.data); err != nil {
				return nil, err
			}
		}
		// The receiver is an instance like any other now.
		ms.Completed, ms.EndTimestamp, ms.TargetNodeDomainDetected = true, &now, true
		delete(vmi.Annotations, kubevirtv1.CreateMigrationTarget)
		annotationsChanged = true
		ip := InstanceIP(vmiOwnerUID(vmi))
		vmi.Status.Phase = kubevirtv1.Running
		vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: ip, IPs: []string{ip}, InterfaceName: "eth0"}}
		vmi.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	case !key.target && next == kubevirtv1.MigrationRunning:
		ms.StartTimestamp = &now
	case !key.target && next == kubevirtv1.MigrationSucceeded:
		// The domain lives on the target now: the source instance ends.
		ms.Completed, ms.EndTimestamp = true, &now
		vmi.Status.Phase = kubevirtv1.Succeeded
	}
	if apiequality.Semantic.DeepEqual(before, vmi) {
		return vmi, nil
	}
	if annotationsChanged && r.hasStatusSubresource("virtualmachineinstances") {
		st := vmi.Status
		if err := r.client.Update(ctx, vmi); err != nil {
			return nil, fmt.Errorf("update VirtualMachineInstance %s: %w", klog.KObj(vmi), err)
		}
		vmi.Status = st
	}
	if err := r.writeStatus(ctx, vmi, "virtualmachineinstances"); err != nil {
		return nil, err
	}
	return vmi, nil
}

// volumeClaim is the claim a DataVolume or PersistentVolumeClaim volume
// names (a DataVolume's claim has its name), "" for any other volume.
func volumeClaim(v kubevirtv1.Volume) string {
	switch {
	case v.DataVolume != nil:
		return v.DataVolume.Name
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	}
	return ""
}

// sourceData reads what the source instance's disks hold: the
// DataAnnotation of each claim its volumes name, the non-empty ones. A
// claim that does not exist holds nothing to copy.
func (r migrationReconciler) sourceData(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (map[string]string, error) {
	var data map[string]string
	for _, v := range vmi.Spec.Volumes {
		name := volumeClaim(v)
		if name == "" {
			continue
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.client.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: name}, pvc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get PersistentVolumeClaim %s/%s of migrating VirtualMachineInstance %s: %w", vmi.Namespace, name, klog.KObj(vmi), err)
		}
		if d := pvc.Annotations[DataAnnotation]; d != "" {
			if data == nil {
				data = map[string]string{}
			}
			data[name] = d
		}
	}
	return data, nil
}

// receiveData writes the source's data into the receiver instance's
// claims of the same names, as the block migration fills the target VM's
// volumes. A claim missing is an error to retry, not one to skip: the
// target VM's DataVolumes are populated before its receiver instance
// exists, so its claims are there (a cache behind catches up).
func (r migrationReconciler) receiveData(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, data map[string]string) error {
	for _, v := range vmi.Spec.Volumes {
		name := volumeClaim(v)
		d, ok := data[name]
		if name == "" || !ok {
			continue
		}
		key := client.ObjectKey{Namespace: vmi.Namespace, Name: name}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.client.Get(ctx, key, pvc); err != nil {
			return fmt.Errorf("get PersistentVolumeClaim %s the migration into %s copies to: %w", key, klog.KObj(vmi), err)
		}
		if pvc.Annotations[DataAnnotation] == d {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, DataAnnotation, d)
		if err := r.client.Patch(ctx, pvc, patch); err != nil {
			return fmt.Errorf("copy data into PersistentVolumeClaim %s: %w", key, err)
		}
	}
	return nil
}

// vmiOwnerUID is the UID of the instance's VM (the simulator's instance
// addresses derive from it), the instance's own without one.
func vmiOwnerUID(vmi *kubevirtv1.VirtualMachineInstance) types.UID {
	if ref := metav1.GetControllerOf(vmi); ref != nil {
		return ref.UID
	}
	return vmi.UID
}

// ensureTargetPod creates the receiver's virt-launcher pod on the first
// node with room, unless it exists; false when it cannot be placed (no
// room, a missing network, Faults.ReceiverNeverReady).
func (r migrationReconciler) ensureTargetPod(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (bool, error) {
	name := LauncherPodName(vmi.Name, vmi.UID)
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: name}, &corev1.Pod{}); err == nil {
		return true, nil
	} else if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("get target pod %s/%s: %w", vmi.Namespace, name, err)
	}
	ref := metav1.GetControllerOf(vmi)
	if ref == nil || ref.Kind != "VirtualMachine" {
		return false, nil
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: ref.Name}, vm); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if f := r.faults.ReceiverNeverReady; f != nil && f(client.ObjectKeyFromObject(vm)) {
		return false, nil
	}
	requests, missing, err := r.launcherRequests(ctx, vm)
	if err != nil || missing != "" {
		return false, err
	}
	node, err := r.pickNode(ctx, requests)
	if err != nil || node == "" {
		return false, err
	}
	return true, r.ensurePod(ctx, launcherPod(vm, vmi, node, requests))
}

// deleteLauncherPods deletes the instance's virt-launcher pods.
func (s *Simulator) deleteLauncherPods(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return fmt.Errorf("list pods of VirtualMachineInstance %s: %w", klog.KObj(vmi), err)
	}
	for i := range pods.Items {
		if err := s.client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete pod %s: %w", klog.KObj(&pods.Items[i]), err)
		}
		s.mu.Lock()
		delete(s.assumed, nn(&pods.Items[i]))
		s.mu.Unlock()
	}
	return nil
}

// migrationsOf maps an instance to the migrations naming it.
func (s *Simulator) migrationsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list kubevirtv1.VirtualMachineInstanceMigrationList
	if err := s.client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list VirtualMachineInstanceMigrations")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.VMIName == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// migratedAway tells whether the instance is the source of a
// decentralized migration that completed: KubeVirt then halts its VM.
func migratedAway(vmi *kubevirtv1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	return vmi.IsFinal() && ms != nil && ms.Completed && !ms.Failed &&
		ms.SourceState != nil && ms.TargetState != nil && ms.TargetState.SyncAddress != nil
}

// received tells whether the instance was the receiver of a decentralized
// migration that completed.
func received(vmi *kubevirtv1.VirtualMachineInstance) bool {
	ms := vmi.Status.MigrationState
	return !vmi.IsMigrationTarget() && ms != nil && ms.Completed && !ms.Failed &&
		ms.TargetState != nil && ms.TargetState.MigrationUID != "" && ms.TargetState.SyncAddress == nil
}
