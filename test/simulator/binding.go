package simulator

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// WaitForFirstConsumer storage, as CDI (with its HonorWaitForFirstConsumer
// behaviour, the default) and KubeVirt handle it: the claim of a
// DataVolume whose StorageClass has volumeBindingMode WaitForFirstConsumer
// stays Pending, CDI starts no importer and shows the DataVolume in phase
// WaitForFirstConsumer until a pod uses the claim. For a VM's DataVolume
// that pod is KubeVirt's: KubeVirt counts WaitForFirstConsumer as ready to
// start, and once the VM is asked to run it schedules an ephemeral
// provisioning pod that binds the claim; then CDI imports. A halted VM
// over such DataVolumes is Stopped, with nothing imported.

// AnnImmediateBinding on a DataVolume asks CDI to bind its claim and
// import at once, even on WaitForFirstConsumer storage (CDI reads the
// annotation's presence; "true" is its usual value). Golden images carry
// it: nothing would ever consume them otherwise.
const AnnImmediateBinding = "cdi.kubevirt.io/storage.bind.immediate.requested"

// Annotations that make a StorageClass the cluster's default: the GA one,
// and the beta one Kubernetes still honours.
const (
	AnnDefaultStorageClass     = "storageclass.kubernetes.io/is-default-class"
	annBetaDefaultStorageClass = "storageclass.beta.kubernetes.io/is-default-class"
)

// CDI's reason on the Bound condition of a DataVolume whose claim waits.
const reasonClaimPending = "Pending"

// waitsForFirstConsumer tells whether the DataVolume's claim binds only
// once a pod uses it: its StorageClass (the one it names, or the
// cluster's default when it names none) has volumeBindingMode
// WaitForFirstConsumer, and it does not ask for immediate binding. A
// StorageClass that does not exist binds immediately, as before there was
// any.
func (s *Simulator) waitsForFirstConsumer(ctx context.Context, dv *cdiv1beta1.DataVolume) (bool, error) {
	if _, ok := dv.Annotations[AnnImmediateBinding]; ok {
		return false, nil
	}
	sc, err := s.storageClassOf(ctx, dv)
	if err != nil || sc == nil {
		return false, err
	}
	return sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer, nil
}

// storageClassOf returns the StorageClass the DataVolume's claim gets:
// the one spec.pvc or spec.storage names, else the default StorageClass;
// nil when there is none. spec.pvc's storageClassName "" asks for no
// class at all, as it does on a claim.
func (s *Simulator) storageClassOf(ctx context.Context, dv *cdiv1beta1.DataVolume) (*storagev1.StorageClass, error) {
	var name *string
	switch {
	case dv.Spec.PVC != nil:
		name = dv.Spec.PVC.StorageClassName
		if name != nil && *name == "" {
			return nil, nil
		}
	case dv.Spec.Storage != nil:
		name = dv.Spec.Storage.StorageClassName
	}
	if name != nil && *name != "" {
		sc := &storagev1.StorageClass{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: *name}, sc); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("get StorageClass %s of DataVolume %s/%s: %w", *name, dv.Namespace, dv.Name, err)
		}
		return sc, nil
	}
	return s.defaultStorageClass(ctx)
}

// defaultStorageClass is the StorageClass annotated as the default; of
// several, the newest, as the API server's DefaultStorageClass admission
// picks it.
func (s *Simulator) defaultStorageClass(ctx context.Context) (*storagev1.StorageClass, error) {
	var list storagev1.StorageClassList
	if err := s.client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list StorageClasses: %w", err)
	}
	var out *storagev1.StorageClass
	for i := range list.Items {
		sc := &list.Items[i]
		if sc.Annotations[AnnDefaultStorageClass] != "true" && sc.Annotations[annBetaDefaultStorageClass] != "true" {
			continue
		}
		if out == nil || sc.CreationTimestamp.After(out.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&out.CreationTimestamp) && sc.Name < out.Name) {
			out = sc
		}
	}
	return out, nil
}

// ensurePendingClaim creates the DataVolume's claim, Pending, as CDI
// creates it on WaitForFirstConsumer storage: no volume yet, no data.
func (s *Simulator) ensurePendingClaim(ctx context.Context, dv *cdiv1beta1.DataVolume) error {
	key := client.ObjectKeyFromObject(dv)
	if err := s.client.Get(ctx, key, &corev1.PersistentVolumeClaim{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get PersistentVolumeClaim %s: %w", key, err)
	}
	spec := claimSpec(dv)
	spec.VolumeName = ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: dv.Namespace, Name: dv.Name,
			Labels:          map[string]string{"app": "containerized-data-importer"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dv, cdiv1beta1.SchemeGroupVersion.WithKind("DataVolume"))},
		},
		Spec: spec,
	}
	if err := s.client.Create(ctx, pvc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("PersistentVolumeClaim %s exists: %w", key, errStale)
		}
		return fmt.Errorf("create PersistentVolumeClaim %s: %w", key, err)
	}
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	if err := s.client.Status().Update(ctx, pvc); err != nil {
		return fmt.Errorf("mark PersistentVolumeClaim %s Pending: %w", key, err)
	}
	return nil
}

// bindWaitingClaim binds the DataVolume's claim that waited for its first
// consumer: the volume is provisioned on the consumer's node (the claim
// gets its volumeName), then the claim is Bound, with nothing on it yet.
func (s *Simulator) bindWaitingClaim(ctx context.Context, dv *cdiv1beta1.DataVolume) error {
	key := client.ObjectKeyFromObject(dv)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, key, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("PersistentVolumeClaim %s not seen yet: %w", key, errStale)
		}
		return fmt.Errorf("get PersistentVolumeClaim %s: %w", key, err)
	}
	if !metav1.IsControlledBy(pvc, dv) || pvc.Status.Phase == corev1.ClaimBound {
		return nil
	}
	if pvc.Spec.VolumeName == "" {
		pvc = pvc.DeepCopy()
		pvc.Spec.VolumeName = claimSpec(dv).VolumeName
		if err := s.client.Update(ctx, pvc); err != nil {
			return fmt.Errorf("provision a volume for PersistentVolumeClaim %s: %w", key, err)
		}
	}
	return s.bindClaim(ctx, pvc)
}

// startExpected tells whether KubeVirt starts (or runs) the VM, so that
// its ephemeral provisioning pod, then its launcher, consumes its claims:
// it has an instance, should run, or waits as a migration's receiver.
func startExpected(vm *kubevirtv1.VirtualMachine, hasInstance bool) bool {
	return hasInstance || ShouldRun(vm, hasInstance) || RunStrategy(vm) == kubevirtv1.RunStrategyWaitAsReceiver
}

// consumed tells whether a standalone DataVolume's claim has a consumer:
// a VM of its namespace that uses it as a volume and is expected to
// start, or a pod of its namespace, not finished, that mounts the claim.
func (s *Simulator) consumed(ctx context.Context, dv *cdiv1beta1.DataVolume) (bool, error) {
	var vms kubevirtv1.VirtualMachineList
	if err := s.client.List(ctx, &vms, client.InNamespace(dv.Namespace)); err != nil {
		return false, fmt.Errorf("list VirtualMachines in %s: %w", dv.Namespace, err)
	}
	for i := range vms.Items {
		vm := &vms.Items[i]
		if vm.DeletionTimestamp.IsZero() && slices.Contains(vmClaims(vm), dv.Name) && startExpected(vm, vm.Status.Created) {
			return true, nil
		}
	}
	var pods corev1.PodList
	if err := s.client.List(ctx, &pods, client.InNamespace(dv.Namespace)); err != nil {
		return false, fmt.Errorf("list pods in %s: %w", dv.Namespace, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if slices.Contains(podClaims(p), dv.Name) {
			return true, nil
		}
	}
	return false, nil
}

// vmClaims are the claims the VM's DataVolume and PersistentVolumeClaim
// volumes name.
func vmClaims(vm *kubevirtv1.VirtualMachine) []string {
	if vm.Spec.Template == nil {
		return nil
	}
	var out []string
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if name := volumeClaim(v); name != "" {
			out = append(out, name)
		}
	}
	return out
}

func podClaims(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// dataVolumesConsumedBy maps a VM or a pod to the standalone DataVolumes
// of its namespace it uses, which may wait for it as their first
// consumer.
func (s *Simulator) dataVolumesConsumedBy(ctx context.Context, o client.Object) []reconcile.Request {
	var claims []string
	switch o := o.(type) {
	case *kubevirtv1.VirtualMachine:
		claims = vmClaims(o)
	case *corev1.Pod:
		claims = podClaims(o)
	}
	if len(claims) == 0 {
		return nil
	}
	var out []reconcile.Request
	for _, name := range claims {
		dv := &cdiv1beta1.DataVolume{}
		key := client.ObjectKey{Namespace: o.GetNamespace(), Name: name}
		if err := s.client.Get(ctx, key, dv); err != nil {
			if !apierrors.IsNotFound(err) {
				ctrl.LoggerFrom(ctx).Error(err, "get DataVolume", "dataVolume", key)
			}
			continue
		}
		if dv.Status.Phase == cdiv1beta1.WaitForFirstConsumer && !ownedByVM(dv) {
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// isWaitingPhase tells whether a DataVolume in this phase has nothing
// imported and no importer running.
func isWaitingPhase(p cdiv1beta1.DataVolumePhase) bool {
	return p == "" || p == cdiv1beta1.Pending || p == cdiv1beta1.WaitForFirstConsumer
}
