package simulator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// progressStep is how far an import moves per step.
const progressStep = 25.0

// hasStatusSubresource tells whether the resource's CRD has a status
// subresource; true unless discovery said otherwise.
func (s *Simulator) hasStatusSubresource(resource string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.statusSubresource[resource]
	return !ok || v
}

// writeStatus writes obj's status through the status subresource, or with
// a plain update when the CRD has none.
func (s *Simulator) writeStatus(ctx context.Context, obj client.Object, resource string) error {
	var err error
	if s.hasStatusSubresource(resource) {
		err = s.client.Status().Update(ctx, obj)
	} else {
		err = s.client.Update(ctx, obj)
	}
	if err != nil {
		return fmt.Errorf("update %s %s status: %w", resource, klog.KObj(obj), err)
	}
	return nil
}

// writeVMStatus writes the VM's status when it changed or when
// observedGeneration lags. Without a status subresource the write itself
// bumps metadata.generation by one, so observedGeneration is set to the
// generation the write will produce.
func (s *Simulator) writeVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, status *kubevirtv1.VirtualMachineStatus) error {
	a, b := vm.Status.DeepCopy(), status.DeepCopy()
	a.ObservedGeneration, b.ObservedGeneration = 0, 0
	if apiequality.Semantic.DeepEqual(a, b) && vm.Status.ObservedGeneration == vm.Generation {
		return nil
	}
	vm = vm.DeepCopy()
	vm.Status = *status
	vm.Status.ObservedGeneration = vm.Generation
	if !s.hasStatusSubresource("virtualmachines") {
		vm.Status.ObservedGeneration = vm.Generation + 1
	}
	return s.writeStatus(ctx, vm, "virtualmachines")
}

// disks is the state of a VM's DataVolumes.
type disks struct {
	// ready: all are Succeeded; failed: one has Failed.
	ready, failed bool
	// unbound: all that are not Succeeded wait for their first consumer
	// (nothing imported, claims Pending): KubeVirt counts them as ready to
	// start, and shows a halted VM over them as Stopped.
	unbound bool
}

// dataVolumes creates the VM's DataVolumes from its templates (whether
// the VM runs or not, as KubeVirt does) and moves each one import step;
// consumed tells whether KubeVirt has a pod using their claims (the VM is
// asked to start). It tells whether all are Succeeded, one Failed, or all
// others wait for their first consumer, and how long to wait for the next
// step.
func (s *Simulator) dataVolumes(ctx context.Context, vm *kubevirtv1.VirtualMachine, consumed bool) (disks, time.Duration, error) {
	ready, failed, unbound := true, false, true
	var wait time.Duration
	for i := range vm.Spec.DataVolumeTemplates {
		t := &vm.Spec.DataVolumeTemplates[i]
		dv := &cdiv1beta1.DataVolume{}
		key := client.ObjectKey{Namespace: vm.Namespace, Name: t.Name}
		if err := s.client.Get(ctx, key, dv); err != nil {
			if !apierrors.IsNotFound(err) {
				return disks{}, 0, fmt.Errorf("get DataVolume %s: %w", key, err)
			}
			dv = &cdiv1beta1.DataVolume{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: vm.Namespace, Name: t.Name,
					Labels: t.Labels, Annotations: t.Annotations,
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind)},
				},
				Spec: *t.Spec.DeepCopy(),
			}
			if err := s.client.Create(ctx, dv); err != nil && !apierrors.IsAlreadyExists(err) {
				return disks{}, 0, fmt.Errorf("create DataVolume %s: %w", key, err)
			}
			ready = false
			if unbound, err = s.unbound(ctx, dv, unbound); err != nil {
				return disks{}, 0, err
			}
			continue
		}
		if dv.Status.Phase == cdiv1beta1.Succeeded {
			continue
		}
		ready = false
		failed = failed || dv.Status.Phase == cdiv1beta1.Failed
		var err error
		if unbound, err = s.unbound(ctx, dv, unbound); err != nil {
			return disks{}, 0, err
		}
		w, err := s.stepDataVolume(ctx, dv, consumed)
		if err != nil {
			return disks{}, 0, err
		}
		wait = minPositive(wait, w)
	}
	return disks{ready: ready, failed: failed, unbound: unbound && !ready}, wait, nil
}

// unbound tells whether all DataVolumes so far (so) and this one, not
// Succeeded, have nothing bound: it waits for its first consumer, or is
// about to (new, on WaitForFirstConsumer storage).
func (s *Simulator) unbound(ctx context.Context, dv *cdiv1beta1.DataVolume, so bool) (bool, error) {
	switch {
	case !so:
		return false, nil
	case dv.Status.Phase == cdiv1beta1.WaitForFirstConsumer:
		return true, nil
	case dv.Status.Phase != "":
		return false, nil
	}
	return s.waitsForFirstConsumer(ctx, dv)
}

// stepDataVolume moves an import one step: Pending while its DataSource
// is missing or not Ready, then ImportScheduled, ImportInProgress 0.0% to
// 100.0%, Succeeded with a Bound PersistentVolumeClaim of the same name
// (created before the phase says Succeeded, so whoever sees Succeeded finds
// the claim). An import from a host that ends in FailingHostSuffix goes
// from ImportScheduled to Failed instead, and so does one from an export's
// volume URL while no Ready export serves it (checked at every step: an
// export that goes away fails the import under way). Failed and Succeeded
// are final.
//
// On WaitForFirstConsumer storage (binding.go) the DataVolume goes to
// WaitForFirstConsumer instead of ImportScheduled, with a Pending claim
// and nothing imported, and stays there until consumed says its claim
// has a consumer; the claim is then bound and the import runs as above.
func (s *Simulator) stepDataVolume(ctx context.Context, dv *cdiv1beta1.DataVolume, consumed bool) (time.Duration, error) {
	if dv.Status.Phase == cdiv1beta1.Failed {
		return 0, nil
	}
	if dv.Status.Phase == cdiv1beta1.Succeeded {
		return 0, s.ensureClaim(ctx, dv, "")
	}
	if ok, wait := s.due(dv.UID); !ok {
		return wait, nil
	}
	st := dv.Status.DeepCopy()
	sourceReady, err := s.sourceReady(ctx, dv)
	if err != nil {
		return 0, err
	}
	// A claim that waits for its first consumer is created Pending: the
	// first step goes to WaitForFirstConsumer whatever the consumers, as
	// KubeVirt starts a VM's provisioning pod only on seeing that phase.
	waiting := false
	if sourceReady && isWaitingPhase(st.Phase) {
		wffc, err := s.waitsForFirstConsumer(ctx, dv)
		if err != nil {
			return 0, err
		}
		waiting = wffc && (st.Phase != cdiv1beta1.WaitForFirstConsumer || !consumed)
	}
	// Once scheduled, an import fails when its source cannot be read: a
	// host under FailingHostSuffix, an export that is not Ready.
	failure := ""
	if sourceReady && !isWaitingPhase(st.Phase) {
		if failure, err = s.importFailure(ctx, dv); err != nil {
			return 0, err
		}
	}
	now := metav1.NewTime(s.clock.Now())
	switch {
	case !sourceReady:
		st.Phase, st.Progress = cdiv1beta1.Pending, "N/A"
	case waiting:
		if err := s.ensurePendingClaim(ctx, dv); err != nil {
			return 0, err
		}
		st.Phase, st.Progress = cdiv1beta1.WaitForFirstConsumer, "N/A"
		setDVCondition(st, cdiv1beta1.DataVolumeBound, corev1.ConditionFalse, reasonClaimPending, fmt.Sprintf("PVC %s Pending", dv.Name), now)
		setDVCondition(st, cdiv1beta1.DataVolumeReady, corev1.ConditionFalse, "", "", now)
	case st.Phase == cdiv1beta1.WaitForFirstConsumer:
		// The consumer is scheduled: the claim binds on its node.
		if err := s.bindWaitingClaim(ctx, dv); err != nil {
			return 0, err
		}
		st.Phase, st.Progress = cdiv1beta1.ImportScheduled, "N/A"
		setDVCondition(st, cdiv1beta1.DataVolumeBound, corev1.ConditionTrue, "Bound", fmt.Sprintf("PVC %s Bound", dv.Name), now)
	case st.Phase == "" || st.Phase == cdiv1beta1.Pending:
		st.Phase, st.Progress = cdiv1beta1.ImportScheduled, "N/A"
	case failure != "":
		st.Phase, st.Progress = cdiv1beta1.Failed, "N/A"
		setDVCondition(st, cdiv1beta1.DataVolumeRunning, corev1.ConditionFalse, reasonImportError, failure, now)
		setDVCondition(st, cdiv1beta1.DataVolumeReady, corev1.ConditionFalse, reasonImportError, failure, now)
	case st.Phase == cdiv1beta1.ImportScheduled:
		st.Phase, st.Progress = cdiv1beta1.ImportInProgress, formatProgress(0)
		setDVCondition(st, cdiv1beta1.DataVolumeRunning, corev1.ConditionTrue, "Running", "", now)
	default:
		var p float64
		if _, err := fmt.Sscanf(string(st.Progress), "%f%%", &p); err != nil {
			p = 0
		}
		if p >= 100 {
			data, err := s.importedData(ctx, dv)
			if err != nil {
				return 0, err
			}
			if err := s.ensureClaim(ctx, dv, data); err != nil {
				return 0, err
			}
			st.Phase = cdiv1beta1.Succeeded
			setDVCondition(st, cdiv1beta1.DataVolumeRunning, corev1.ConditionFalse, "Completed", "", now)
			setDVCondition(st, cdiv1beta1.DataVolumeBound, corev1.ConditionTrue, "Bound", fmt.Sprintf("PVC %s Bound", dv.Name), now)
			setDVCondition(st, cdiv1beta1.DataVolumeReady, corev1.ConditionTrue, "Completed", "", now)
		} else {
			st.Phase, st.Progress = cdiv1beta1.ImportInProgress, formatProgress(min(p+progressStep, 100))
		}
	}
	if apiequality.Semantic.DeepEqual(st, &dv.Status) {
		return 0, nil
	}
	dv = dv.DeepCopy()
	dv.Status = *st
	if err := s.writeStatus(ctx, dv, "datavolumes"); err != nil {
		return 0, err
	}
	s.stepped(dv.UID)
	return s.stepDelay, nil
}

// setDVCondition sets a DataVolume condition, moving its transition time
// only when the status changes.
func setDVCondition(st *cdiv1beta1.DataVolumeStatus, t cdiv1beta1.DataVolumeConditionType, status corev1.ConditionStatus, reason, message string, now metav1.Time) {
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
	st.Conditions = append(st.Conditions, cdiv1beta1.DataVolumeCondition{
		Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: now,
	})
}

func formatProgress(p float64) cdiv1beta1.DataVolumeProgress {
	return cdiv1beta1.DataVolumeProgress(fmt.Sprintf("%.1f%%", p))
}

// sourceReady tells whether the DataVolume's sourceRef, if any, names a
// DataSource that exists and is Ready.
func (s *Simulator) sourceReady(ctx context.Context, dv *cdiv1beta1.DataVolume) (bool, error) {
	ref := dv.Spec.SourceRef
	if ref == nil {
		return true, nil
	}
	ns := dv.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = *ref.Namespace
	}
	ds := &cdiv1beta1.DataSource{}
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, ds); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("get DataSource %s/%s: %w", ns, ref.Name, err)
	}
	for _, c := range ds.Status.Conditions {
		if c.Type == cdiv1beta1.DataSourceReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}
