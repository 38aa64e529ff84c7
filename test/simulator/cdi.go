package simulator

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// FailingHostSuffix makes an import fail: a DataVolume whose http, s3,
// gcs, registry, imageio or vddk URL has a host ending in it (such as
// https://images.fail.invalid/rhel9.qcow2) goes from ImportScheduled to
// Failed, with Ready=False and a "no such host" message, as CDI reports an
// unreachable source. ".invalid" never resolves (RFC 2606), so the same
// manifest fails on a real cluster too.
const FailingHostSuffix = ".fail.invalid"

// DataAnnotation on a PersistentVolumeClaim stands for the data on it: a
// test writes it on a VM's claim as a marker, and a claim CDI imports from
// an export's volume URL gets the exported claim's, as the bytes would
// travel on a real cluster; so does the target VM's claim of the same name
// when a decentralized live migration succeeds (migration.go).
const DataAnnotation = "simulator.kubevirt.io/data"

// Reasons the simulator writes into CDI conditions, as CDI does.
const (
	// reasonImportError is the DataVolume Ready and Running reason of a
	// failed import.
	reasonImportError = "Error"
	// ReasonDataSourceReady: the DataSource's PVC or DataVolume is ready.
	ReasonDataSourceReady = "Ready"
	// ReasonDataSourceNotFound: neither a DataVolume nor a PVC of the
	// DataSource's source name exists.
	ReasonDataSourceNotFound = "NotFound"
	// ReasonDataSourceNoSource: the DataSource names no source PVC.
	ReasonDataSourceNoSource = "NoSource"
	// Any other Ready=False reason of a DataSource is the phase of its
	// DataVolume (ImportScheduled, ImportInProgress, Failed…), as CDI
	// writes it.
)

// pvcProtectionFinalizer keeps a claim a pod uses from going away.
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// dataSourceReadyMessage is the message of the simulator's own Ready=True.
const dataSourceReadyMessage = "DataSource is ready to be consumed"

// dataVolumeReconciler advances DataVolumes that no VM owns, such as those
// a ManifestWork creates: VM-owned ones move with their VM.
type dataVolumeReconciler struct{ *Simulator }

// dataSourceReconciler keeps each DataSource's Ready condition, as CDI's
// DataSource controller does.
type dataSourceReconciler struct{ *Simulator }

// Reconcile moves a standalone DataVolume one step and, once it is gone,
// deletes its claim (envtest runs no garbage collector).
func (r dataVolumeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dv := &cdiv1beta1.DataVolume{}
	if err := r.client.Get(ctx, req.NamespacedName, dv); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.deleteOrphanClaim(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("get DataVolume %s: %w", req, err)
	}
	if !dv.DeletionTimestamp.IsZero() || ownedByVM(dv) {
		return ctrl.Result{}, nil
	}
	// Only what may wait for its first consumer needs to know of one.
	consumed := false
	if dv.Status.Phase == cdiv1beta1.WaitForFirstConsumer {
		var err error
		if consumed, err = r.consumed(ctx, dv); err != nil {
			return ctrl.Result{}, err
		}
	}
	wait, err := r.stepDataVolume(ctx, dv, consumed)
	if apierrors.IsConflict(err) || errors.Is(err, errStale) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{RequeueAfter: wait}, err
}

func ownedByVM(dv *cdiv1beta1.DataVolume) bool {
	ref := metav1.GetControllerOf(dv)
	gvk := kubevirtv1.VirtualMachineGroupVersionKind
	return ref != nil && ref.Kind == gvk.Kind && strings.HasPrefix(ref.APIVersion, gvk.Group+"/")
}

// ensureClaim creates the DataVolume's PersistentVolumeClaim, Bound, as
// CDI's populated claim looks once an import is done. Size, access modes,
// storage class and volume mode come from spec.pvc or spec.storage;
// ReadWriteOnce and 1Gi where the DataVolume leaves them to CDI's storage
// profiles and size detection. data is the claim's DataAnnotation: set on
// a new claim, and on the DataVolume's own claim that waited for its
// first consumer (created Pending, bound when the import began).
func (s *Simulator) ensureClaim(ctx context.Context, dv *cdiv1beta1.DataVolume, data string) error {
	key := client.ObjectKeyFromObject(dv)
	existing := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, key, existing); err == nil {
		if !metav1.IsControlledBy(existing, dv) {
			return nil
		}
		if data != "" && existing.Annotations[DataAnnotation] != data {
			patch := client.MergeFrom(existing.DeepCopy())
			metav1.SetMetaDataAnnotation(&existing.ObjectMeta, DataAnnotation, data)
			if err := s.client.Patch(ctx, existing, patch); err != nil {
				return fmt.Errorf("write the data of PersistentVolumeClaim %s: %w", key, err)
			}
		}
		if existing.Status.Phase == corev1.ClaimBound {
			return nil
		}
		return s.bindClaim(ctx, existing)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get PersistentVolumeClaim %s: %w", key, err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: dv.Namespace, Name: dv.Name,
			Labels:          map[string]string{"app": "containerized-data-importer"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(dv, cdiv1beta1.SchemeGroupVersion.WithKind("DataVolume"))},
		},
		Spec: claimSpec(dv),
	}
	if data != "" {
		pvc.Annotations = map[string]string{DataAnnotation: data}
	}
	if err := s.client.Create(ctx, pvc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("PersistentVolumeClaim %s exists: %w", key, errStale)
		}
		return fmt.Errorf("create PersistentVolumeClaim %s: %w", key, err)
	}
	return s.bindClaim(ctx, pvc)
}

func (s *Simulator) bindClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	pvc = pvc.DeepCopy()
	pvc.Status = corev1.PersistentVolumeClaimStatus{
		Phase:       corev1.ClaimBound,
		AccessModes: pvc.Spec.AccessModes,
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
	}
	if err := s.client.Status().Update(ctx, pvc); err != nil {
		return fmt.Errorf("mark PersistentVolumeClaim %s Bound: %w", klog.KObj(pvc), err)
	}
	return nil
}

func claimSpec(dv *cdiv1beta1.DataVolume) corev1.PersistentVolumeClaimSpec {
	var spec corev1.PersistentVolumeClaimSpec
	switch {
	case dv.Spec.PVC != nil:
		spec = *dv.Spec.PVC.DeepCopy()
	case dv.Spec.Storage != nil:
		st := dv.Spec.Storage.DeepCopy()
		spec = corev1.PersistentVolumeClaimSpec{
			AccessModes: st.AccessModes, Selector: st.Selector, Resources: st.Resources,
			StorageClassName: st.StorageClassName, VolumeMode: st.VolumeMode,
		}
	}
	if len(spec.AccessModes) == 0 {
		spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	if _, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		if spec.Resources.Requests == nil {
			spec.Resources.Requests = corev1.ResourceList{}
		}
		spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Gi")
	}
	// Bound to a volume named as dynamic provisioning names it; no
	// PersistentVolume object backs it.
	spec.VolumeName = "pvc-" + string(dv.UID)
	return spec
}

// deleteOrphanClaim deletes the claim a gone DataVolume had, and forgets
// the DataVolume's steps.
func (s *Simulator) deleteOrphanClaim(ctx context.Context, key client.ObjectKey) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := s.client.Get(ctx, key, pvc); err != nil {
		return client.IgnoreNotFound(err)
	}
	ref := metav1.GetControllerOf(pvc)
	if ref == nil || ref.Kind != "DataVolume" || ref.Name != key.Name {
		return nil
	}
	s.forget(ref.UID)
	// The API server's StorageObjectInUseProtection admission puts this
	// finalizer on every claim; kube-controller-manager, which envtest
	// does not run, removes it once no pod uses the claim. No pod uses a
	// simulated claim.
	if controllerutil.ContainsFinalizer(pvc, pvcProtectionFinalizer) {
		patch := client.MergeFrom(pvc.DeepCopy())
		controllerutil.RemoveFinalizer(pvc, pvcProtectionFinalizer)
		if err := s.client.Patch(ctx, pvc, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove %s from PersistentVolumeClaim %s: %w", pvcProtectionFinalizer, key, err)
		}
	}
	if err := s.client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete PersistentVolumeClaim %s of a deleted DataVolume: %w", key, err)
	}
	return nil
}

// importFailure is the message of an import that cannot read its source,
// "" when it can.
func (s *Simulator) importFailure(ctx context.Context, dv *cdiv1beta1.DataVolume) (string, error) {
	if host, fails := failingHost(dv); fails {
		return fmt.Sprintf("Unable to connect to %s data source: dial tcp: lookup %s: no such host", sourceKind(dv), host), nil
	}
	return s.exportImportFailure(ctx, dv)
}

// failingHost returns the host of the DataVolume's import URL and whether
// it ends in FailingHostSuffix.
func failingHost(dv *cdiv1beta1.DataVolume) (string, bool) {
	raw := sourceURL(dv.Spec.Source)
	if raw == "" {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	host := u.Hostname()
	return host, strings.HasSuffix(host, FailingHostSuffix)
}

func sourceURL(src *cdiv1beta1.DataVolumeSource) string {
	switch {
	case src == nil:
		return ""
	case src.HTTP != nil:
		return src.HTTP.URL
	case src.S3 != nil:
		return src.S3.URL
	case src.GCS != nil:
		return src.GCS.URL
	case src.Registry != nil && src.Registry.URL != nil:
		return *src.Registry.URL
	case src.Imageio != nil:
		return src.Imageio.URL
	case src.VDDK != nil:
		return src.VDDK.URL
	}
	return ""
}

func sourceKind(dv *cdiv1beta1.DataVolume) string {
	src := dv.Spec.Source
	switch {
	case src == nil:
		return "unknown"
	case src.HTTP != nil:
		return "http"
	case src.S3 != nil:
		return "s3"
	case src.GCS != nil:
		return "gcs"
	case src.Registry != nil:
		return "registry"
	case src.Imageio != nil:
		return "imageio"
	case src.VDDK != nil:
		return "vddk"
	}
	return "unknown"
}

// Reconcile sets the DataSource's Ready condition from its source: True
// (Ready) when the DataVolume of that name has Succeeded, or when there is
// no such DataVolume but a claim of that name exists; False with the
// DataVolume's phase as the reason while it imports or after it failed;
// False NotFound when neither exists; False NoSource without a source PVC.
//
// A DataSource already Ready=True by someone else's hand (tests and the
// local fleet mark golden images Ready on spokes that hold no claims) is
// left alone while neither a DataVolume nor a claim of its source exists.
func (r dataSourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ds := &cdiv1beta1.DataSource{}
	if err := r.client.Get(ctx, req.NamespacedName, ds); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	status, reason, message, err := r.dataSourceReady(ctx, ds)
	if err != nil {
		return ctrl.Result{}, err
	}
	cur := findDataSourceCondition(ds.Status.Conditions)
	if reason == ReasonDataSourceNotFound && cur != nil && cur.Status == corev1.ConditionTrue && cur.Message != dataSourceReadyMessage {
		return ctrl.Result{}, nil
	}
	st := ds.Status.DeepCopy()
	setDataSourceCondition(st, status, reason, message, metav1.NewTime(r.clock.Now()))
	if apiequality.Semantic.DeepEqual(st, &ds.Status) {
		return ctrl.Result{}, nil
	}
	ds = ds.DeepCopy()
	ds.Status = *st
	err = r.writeStatus(ctx, ds, "datasources")
	if apierrors.IsConflict(err) {
		return ctrl.Result{Requeue: true}, nil
	}
	return ctrl.Result{}, err
}

func (s *Simulator) dataSourceReady(ctx context.Context, ds *cdiv1beta1.DataSource) (corev1.ConditionStatus, string, string, error) {
	src := ds.Spec.Source.PVC
	if src == nil {
		return corev1.ConditionFalse, ReasonDataSourceNoSource, "No source PVC set", nil
	}
	key := dataSourceSource(ds)
	dv := &cdiv1beta1.DataVolume{}
	err := s.client.Get(ctx, key, dv)
	switch {
	case err == nil:
		if dv.Status.Phase == cdiv1beta1.Succeeded {
			return corev1.ConditionTrue, ReasonDataSourceReady, dataSourceReadyMessage, nil
		}
		phase := string(dv.Status.Phase)
		if phase == "" {
			phase = string(cdiv1beta1.Pending)
		}
		return corev1.ConditionFalse, phase, fmt.Sprintf("Import DataVolume phase %s", phase), nil
	case !apierrors.IsNotFound(err):
		return "", "", "", fmt.Errorf("get DataVolume %s: %w", key, err)
	}
	if err := s.client.Get(ctx, key, &corev1.PersistentVolumeClaim{}); err == nil {
		return corev1.ConditionTrue, ReasonDataSourceReady, dataSourceReadyMessage, nil
	} else if !apierrors.IsNotFound(err) {
		return "", "", "", fmt.Errorf("get PersistentVolumeClaim %s: %w", key, err)
	}
	return corev1.ConditionFalse, ReasonDataSourceNotFound, fmt.Sprintf("Neither DataVolume nor PVC %s found", key), nil
}

// dataSourceSource is the namespace and name of the DataSource's source
// PVC (and DataVolume); the DataSource's namespace when it names none.
func dataSourceSource(ds *cdiv1beta1.DataSource) client.ObjectKey {
	src := ds.Spec.Source.PVC
	if src == nil {
		return client.ObjectKey{}
	}
	ns := src.Namespace
	if ns == "" {
		ns = ds.Namespace
	}
	return client.ObjectKey{Namespace: ns, Name: src.Name}
}

func findDataSourceCondition(conds []cdiv1beta1.DataSourceCondition) *cdiv1beta1.DataSourceCondition {
	for i := range conds {
		if conds[i].Type == cdiv1beta1.DataSourceReady {
			return &conds[i]
		}
	}
	return nil
}

func setDataSourceCondition(st *cdiv1beta1.DataSourceStatus, status corev1.ConditionStatus, reason, message string, now metav1.Time) {
	c := findDataSourceCondition(st.Conditions)
	if c == nil {
		st.Conditions = append(st.Conditions, cdiv1beta1.DataSourceCondition{Type: cdiv1beta1.DataSourceReady})
		c = &st.Conditions[len(st.Conditions)-1]
	}
	if c.Status != status {
		c.LastTransitionTime = now
	}
	c.Status, c.Reason, c.Message = status, reason, message
}

// dataSourcesOf maps a DataVolume or claim to the DataSources whose source
// it is.
func (s *Simulator) dataSourcesOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list cdiv1beta1.DataSourceList
	if err := s.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list DataSources")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if dataSourceSource(&list.Items[i]) == client.ObjectKeyFromObject(o) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// dataVolumesFrom maps a DataSource to the standalone DataVolumes whose
// sourceRef names it, which wait for it to be Ready.
func (s *Simulator) dataVolumesFrom(ctx context.Context, o client.Object) []reconcile.Request {
	var list cdiv1beta1.DataVolumeList
	if err := s.client.List(ctx, &list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list DataVolumes")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		dv := &list.Items[i]
		ref := dv.Spec.SourceRef
		if ref == nil || ref.Name != o.GetName() || ownedByVM(dv) {
			continue
		}
		ns := dv.Namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			ns = *ref.Namespace
		}
		if ns == o.GetNamespace() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(dv)})
		}
	}
	return out
}
