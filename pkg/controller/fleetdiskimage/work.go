package fleetdiskimage

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
	"github.com/fleetvm/fleetvm/pkg/workfeedback"
)

// Feedback names of the DataVolume's status the work agent reports back.
const (
	feedbackPhase    = "phase"
	feedbackProgress = "progress"
)

// resourceDataVolumes is the resource of the DataVolume, in the image's
// work.
const resourceDataVolumes = "datavolumes"

// desiredWork builds the ManifestWork that imports the image on a cluster:
// the image namespace (left behind when the work goes: other images live
// there), the DataVolume that imports it, and the DataSource VMs clone it
// from.
func (r *Reconciler) desiredWork(fdi *fleetv1alpha1.FleetDiskImage, cluster string) (*workv1.ManifestWork, error) {
	key := types.NamespacedName{Namespace: fdi.Namespace, Name: fdi.Name}
	name := diskimage.ObjectName(key)
	ns := r.Config.ImageNamespace
	labels := map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}

	// Credentials are the FleetDiskImage's namespace's own (ScopedName).
	scoped := func(ref string) string { return diskimage.ScopedName(fdi.Namespace, ref) }
	src := &cdiv1beta1.DataVolumeSource{}
	switch s := fdi.Spec.Source; {
	case s.HTTP != nil:
		src.HTTP = &cdiv1beta1.DataVolumeSourceHTTP{URL: s.HTTP.URL, SecretRef: scoped(s.HTTP.SecretRef), CertConfigMap: scoped(s.HTTP.CertConfigMap)}
	case s.Registry != nil:
		url := s.Registry.URL
		src.Registry = &cdiv1beta1.DataVolumeSourceRegistry{URL: &url}
		if s.Registry.SecretRef != "" {
			ref := scoped(s.Registry.SecretRef)
			src.Registry.SecretRef = &ref
		}
	case s.S3 != nil:
		src.S3 = &cdiv1beta1.DataVolumeSourceS3{URL: s.S3.URL, SecretRef: scoped(s.S3.SecretRef)}
	default:
		return nil, fmt.Errorf("spec.source: none of http, registry, s3 is set")
	}
	dv := &cdiv1beta1.DataVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: cdiv1beta1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: map[string]string{
			// Import now, not when a first VM mounts it: VMs clone it.
			"cdi.kubevirt.io/storage.bind.immediate.requested": "true",
		}},
		Spec: cdiv1beta1.DataVolumeSpec{
			Source: src,
			Storage: &cdiv1beta1.StorageSpec{
				StorageClassName: fdi.Spec.Storage.StorageClassName,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: fdi.Spec.Storage.Size,
				}},
			},
		},
	}
	ds := &cdiv1beta1.DataSource{
		TypeMeta:   metav1.TypeMeta{APIVersion: cdiv1beta1.SchemeGroupVersion.String(), Kind: "DataSource"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: cdiv1beta1.DataSourceSpec{Source: cdiv1beta1.DataSourceSource{
			PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: ns, Name: name},
		}},
	}
	namespace := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels},
	}
	var manifests []workv1.Manifest
	for _, o := range []runtime.Object{namespace, dv, ds} {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		manifests = append(manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   cluster,
			Name:        diskimage.WorkName(key),
			Labels:      labels,
			Annotations: map[string]string{diskimage.AnnotationImage: key.String()},
		},
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: manifests},
			DeleteOption: &workv1.DeleteOption{
				PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
				SelectivelyOrphan: &workv1.SelectivelyOrphan{OrphaningRules: []workv1.OrphaningRule{
					{Resource: "namespaces", Name: ns},
				}},
			},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Group: cdiv1beta1.SchemeGroupVersion.Group, Resource: resourceDataVolumes, Namespace: ns, Name: name},
				FeedbackRules: []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{
					{Name: feedbackPhase, Path: ".status.phase"},
					{Name: feedbackProgress, Path: ".status.progress"},
				}}},
			}},
		},
	}, nil
}

// importState reads the image's phase on a cluster from its ManifestWork:
// the DataVolume's phase and progress as the work agent reports them.
func importState(work *workv1.ManifestWork) (fleetv1alpha1.ImagePhase, string, string) {
	fb := workfeedback.Read(work, resourceDataVolumes)
	if fb.NotApplied {
		return fleetv1alpha1.ImagePhaseFailed, "", "the work agent could not apply the image: " + fb.NotAppliedMessage
	}
	phase, progress := fb.Values[feedbackPhase], fb.Values[feedbackProgress]
	if progress == "N/A" {
		progress = ""
	}
	switch cdiv1beta1.DataVolumePhase(phase) {
	case cdiv1beta1.Succeeded:
		return fleetv1alpha1.ImagePhaseReady, "", "imported"
	case cdiv1beta1.Failed:
		return fleetv1alpha1.ImagePhaseFailed, progress, "the import failed on the cluster (see the DataVolume's conditions there)"
	case "":
		return fleetv1alpha1.ImagePhasePending, "", "waiting for the cluster's work agent to report the import"
	case cdiv1beta1.Pending, cdiv1beta1.WaitForFirstConsumer, cdiv1beta1.PendingPopulation:
		return fleetv1alpha1.ImagePhasePending, progress, "DataVolume " + phase
	default:
		return fleetv1alpha1.ImagePhaseImporting, progress, "DataVolume " + phase
	}
}
