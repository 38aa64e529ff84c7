package move

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	exportv1beta1 "kubevirt.io/api/export/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/workfeedback"
)

// A Cold move copies the VM's disks through two OCM ManifestWorks, made
// and removed by the hub with the move:
//
//   - the export work, on the source: KubeVirt's VirtualMachineExport of
//     the VM and the Secret holding its token; the work agent reports the
//     export's phase, Ready reason and external links back (status
//     feedback), so the hub reads them without reaching the cluster;
//   - the import work, on the target: the Secret holding the token header
//     CDI sends, and the ConfigMap holding the export proxy's CA, which
//     the target VM's DataVolumes name (delivery.Import).
//
// The token is the hub's own random value, written only into the two
// works' Secrets: KubeVirt's export checks it, CDI sends it.

const (
	// LabelMove on a move's works is the hash that names them (MoveHash).
	LabelMove = "fleetvm.io/move"
	// AnnotationMove on a move's works is the move, "<namespace>/<name>".
	AnnotationMove = "fleetvm.io/move"
	// TokenHeader is the header KubeVirt's export proxy reads the token
	// from.
	TokenHeader = "x-kubevirt-export-token"
	// exportFormat is the format the target imports: gzip, as KubeVirt's
	// own cross-cluster example does.
	exportFormat = exportv1beta1.KubeVirtGz

	feedbackPhase   = "phase"
	feedbackReason  = "ready-reason"
	feedbackMessage = "ready-message"
	feedbackCert    = "cert"
	// feedbackURL prefixes the feedback of each DataVolume template's
	// volume URL, by its index in spec.dataVolumeTemplates.
	feedbackURL = "url-"

	// resourceExports is the resource of the export, in the export work.
	resourceExports = "virtualmachineexports"
)

// Hash names a move's objects on the clusters: 10 hex digits of its key.
func Hash(m types.NamespacedName) string {
	sum := sha256.Sum256([]byte(m.String()))
	return hex.EncodeToString(sum[:])[:10]
}

// ExportName is the name of the move's VirtualMachineExport, beside the VM
// on the source.
func ExportName(m types.NamespacedName) string { return "fleetvm-move-" + Hash(m) }

// ExportWorkName and ImportWorkName are the names of the move's
// ManifestWorks in the source's and target's cluster namespaces.
func ExportWorkName(m types.NamespacedName) string { return ExportName(m) + "-export" }
func ImportWorkName(m types.NamespacedName) string { return ExportName(m) + "-import" }

// tokenSecretName, headerSecretName and caConfigMapName are the names of
// the export's token Secret on the source and of the import's Secret and
// ConfigMap on the target.
func tokenSecretName(m types.NamespacedName) string  { return ExportName(m) + "-token" }
func headerSecretName(m types.NamespacedName) string { return ExportName(m) + "-header" }
func caConfigMapName(m types.NamespacedName) string  { return ExportName(m) + "-ca" }

// workMeta is the metadata of one of the move's works.
func workMeta(m *fleetv1alpha1.FleetVirtualMachineMove, cluster, name string) metav1.ObjectMeta {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	return metav1.ObjectMeta{
		Namespace: cluster, Name: name,
		Labels: map[string]string{
			fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue, LabelMove: Hash(key),
			fleetv1alpha1.LabelFleetVMName: m.Spec.FleetVirtualMachine, fleetv1alpha1.LabelFleetVMNamespace: m.Namespace,
		},
		Annotations: map[string]string{AnnotationMove: key.String()},
	}
}

// ExportWork is the export work of move m on its source: the export of
// the VM vm (namespace and name on the cluster) with the token, reporting
// the volume URL of every template.
func ExportWork(m *fleetv1alpha1.FleetVirtualMachineMove, vm types.NamespacedName, token string, templates []string) (*workv1.ManifestWork, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: tokenSecretName(key), Labels: map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}},
		StringData: map[string]string{"token": token},
	}
	ttl := DefaultTimeout
	if m.Spec.Timeout != nil {
		ttl = m.Spec.Timeout.Duration
	}
	export := &exportv1beta1.VirtualMachineExport{
		TypeMeta:   metav1.TypeMeta{APIVersion: exportv1beta1.SchemeGroupVersion.String(), Kind: "VirtualMachineExport"},
		ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: ExportName(key), Labels: map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}},
		Spec: exportv1beta1.VirtualMachineExportSpec{
			Source:         corev1.TypedLocalObjectReference{APIGroup: ptr.To(kubevirtv1.SchemeGroupVersion.Group), Kind: "VirtualMachine", Name: vm.Name},
			TokenSecretRef: ptr.To(secret.Name),
			// The move ends it sooner; the TTL ends it if the hub cannot.
			TTLDuration: &metav1.Duration{Duration: ttl},
		},
	}
	paths := []workv1.JsonPath{
		{Name: feedbackPhase, Path: ".status.phase"},
		{Name: feedbackReason, Path: `.status.conditions[?(@.type=="Ready")].reason`},
		{Name: feedbackMessage, Path: `.status.conditions[?(@.type=="Ready")].message`},
		{Name: feedbackCert, Path: ".status.links.external.cert"},
	}
	for i, t := range templates {
		paths = append(paths, workv1.JsonPath{Name: fmt.Sprintf("%s%d", feedbackURL, i),
			Path: fmt.Sprintf(`.status.links.external.volumes[?(@.name==%q)].formats[?(@.format==%q)].url`, t, exportFormat)})
	}
	manifests, err := toManifests(secret, export)
	if err != nil {
		return nil, err
	}
	return &workv1.ManifestWork{
		ObjectMeta: workMeta(m, m.Spec.From, ExportWorkName(key)),
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: manifests},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Group: exportv1beta1.SchemeGroupVersion.Group, Resource: resourceExports, Namespace: vm.Namespace, Name: export.Name},
				FeedbackRules:      []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: paths}},
			}},
		},
	}, nil
}

// ImportWork is the import work of move m on its target: the token header
// Secret and, when the export names one, the CA ConfigMap, beside the VM.
func ImportWork(m *fleetv1alpha1.FleetVirtualMachineMove, namespace, token, cert string) (*workv1.ManifestWork, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	labels := map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}
	objs := []runtime.Object{&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: headerSecretName(key), Labels: labels},
		StringData: map[string]string{"token": TokenHeader + ":" + token},
	}}
	if cert != "" {
		objs = append(objs, &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: caConfigMapName(key), Labels: labels},
			Data:       map[string]string{"ca.pem": cert},
		})
	}
	manifests, err := toManifests(objs...)
	if err != nil {
		return nil, err
	}
	return &workv1.ManifestWork{
		ObjectMeta: workMeta(m, m.Status.To, ImportWorkName(key)),
		Spec:       workv1.ManifestWorkSpec{Workload: workv1.ManifestsTemplate{Manifests: manifests}},
	}, nil
}

func toManifests(objs ...runtime.Object) ([]workv1.Manifest, error) {
	out := make([]workv1.Manifest, 0, len(objs))
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		out = append(out, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}
	return out, nil
}

// Carries tells whether an import work carries the header of token.
func Carries(imports *workv1.ManifestWork, token string) bool {
	return token != "" && Token(imports) == TokenHeader+":"+token
}

// Token is the token an export work carries ("" none); of an import work,
// the header line.
func Token(work *workv1.ManifestWork) string {
	for _, mf := range work.Spec.Workload.Manifests {
		var s corev1.Secret
		if json.Unmarshal(mf.Raw, &s) == nil && s.Kind == "Secret" {
			return s.StringData["token"]
		}
	}
	return ""
}

// ExportFeedback is what the export work reports of the export.
type ExportFeedback struct {
	// Failed: the work agent could not apply the export.
	Failed string
	Phase  string
	// Reason and Message are the export's Ready condition's.
	Reason, Message string
	Cert            string
	// URLs are the volume URLs by template index.
	URLs map[int]string
}

// ReadExport reads the export work's feedback.
func ReadExport(work *workv1.ManifestWork) ExportFeedback {
	got := workfeedback.Read(work, resourceExports)
	fb := ExportFeedback{
		Phase:   got.Values[feedbackPhase],
		Reason:  got.Values[feedbackReason],
		Message: got.Values[feedbackMessage],
		Cert:    got.Values[feedbackCert],
		URLs:    map[int]string{},
	}
	if got.NotApplied {
		fb.Failed = "the work agent could not apply it: " + got.NotAppliedMessage
	}
	for name, val := range got.Values {
		var i int
		if strings.HasPrefix(name, feedbackURL) {
			if _, err := fmt.Sscanf(name, feedbackURL+"%d", &i); err == nil {
				fb.URLs[i] = val
			}
		}
	}
	return fb
}

// reasonExporterFailed is KubeVirt's Ready reason of an export whose
// exporter pod is neither pending nor running: it failed.
const reasonExporterFailed = "Unknown"

// ExportState says, from the feedback, whether the export serves every
// template's volume (urls, by template name), or why it cannot.
func ExportState(fb ExportFeedback, templates []string) (urls map[string]string, failed string) {
	switch {
	case fb.Failed != "":
		return nil, fb.Failed
	case fb.Phase == string(exportv1beta1.Skipped):
		return nil, "KubeVirt skipped it: the VM has no volumes to export"
	case fb.Reason == reasonExporterFailed:
		return nil, "its exporter pod failed" + suffix(fb.Message)
	case fb.Phase != string(exportv1beta1.Ready):
		return nil, ""
	}
	urls = map[string]string{}
	for i, t := range templates {
		u, ok := fb.URLs[i]
		if !ok {
			return nil, fmt.Sprintf("it serves no external link for volume %s: the cluster needs KubeVirt's export proxy reachable from the other clusters", t)
		}
		urls[t] = u
	}
	return urls, ""
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// DataVolumeTemplates are the names of the VM's DataVolume templates, in
// order: the volumes a Cold move copies.
func DataVolumeTemplates(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	if fvm.Spec.Template == nil {
		return nil
	}
	var vm kubevirtv1.VirtualMachine
	if json.Unmarshal(fvm.Spec.Template.Raw, &vm) != nil {
		return nil
	}
	out := make([]string, 0, len(vm.Spec.DataVolumeTemplates))
	for _, t := range vm.Spec.DataVolumeTemplates {
		out = append(out, t.Name)
	}
	return out
}

// ImportFor names the Secret and ConfigMap (when the export has a CA
// cert) the target's DataVolumes read the export with.
func ImportFor(m types.NamespacedName, cert string) (headerSecret, caConfigMap string) {
	headerSecret = headerSecretName(m)
	if cert != "" {
		caConfigMap = caConfigMapName(m)
	}
	return headerSecret, caConfigMap
}
