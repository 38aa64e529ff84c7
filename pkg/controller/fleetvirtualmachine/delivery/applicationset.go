package delivery

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
)

const (
	// ProtectionFinalizer keeps an ApplicationSet until FleetVM has
	// detached its Applications, so deleting the ApplicationSet (by hand,
	// or by FleetVM) never garbage-collects Applications and their VMs.
	ProtectionFinalizer = "fleetvm.io/protect-applications"
	// environmentPlaceholder in spec.source.path becomes the cluster's
	// environment label value.
	environmentPlaceholder = "{{environment}}"
	// PlacementAnnotation on the ApplicationSet names the OCM Placement
	// that chooses where new copies go.
	PlacementAnnotation = "fleetvm.io/placement"
)

// Target is one cluster the ApplicationSet delivers the VM to, an
// element of its list generator: the cluster's name and the value of its
// environment label (which picks a git source's overlay).
type Target struct {
	Name        string `json:"name"`
	Environment string `json:"environment"`
	// RunStrategy holds the VM in this state on this cluster, over
	// spec.runStrategy, while a move needs it ("" none): the move's
	// target is prepared stopped, its source stopped before the target
	// starts.
	RunStrategy fleetv1alpha1.RunStrategy `json:"runStrategy,omitempty"`
	// Hold is the move's hold the VM is held under on this cluster
	// (annotation fleetv1alpha1.AnnotationHold; "" none): the agent
	// reports it back with the VM's state, the move's proof.
	Hold string `json:"hold,omitempty"`
	// Import makes this cluster's VM import its disks from another
	// cluster's export while a Cold move copies them (nil: none).
	Import *Import `json:"-"`
	// Revision is the FleetVM revision this cluster is given, with
	// spec.rollout set (nil without): the latest (spec as it is now) or
	// one a rollout has not replaced here yet.
	Revision *Revision `json:"-"`
}

// Revision is one revision of a FleetVirtualMachine: the fields of its
// spec a rollout carries from cluster to cluster.
type Revision struct {
	Number     int64                              `json:"-"`
	Template   *runtime.RawExtension              `json:"template"`
	DiskImages []fleetv1alpha1.DiskImageReference `json:"diskImages,omitempty"`
	// Source is a git source's revision: its targetRevision (the commit,
	// tag or branch) and the options Argo CD renders it with. Nil for an
	// inline template, so a template revision's content (and hash) is as
	// it always was.
	Source *fleetv1alpha1.GitSource `json:"source,omitempty"`
}

// RevisionOf is the revision fvm's spec is now, numbered n.
func RevisionOf(fvm *fleetv1alpha1.FleetVirtualMachine, n int64) *Revision {
	return &Revision{Number: n, Template: fvm.Spec.Template, DiskImages: fvm.Spec.DiskImages, Source: fvm.Spec.Source}
}

// Hash identifies the revision's content (not its number): the first 16
// bytes of the SHA-256 of its JSON, hex.
func (rev *Revision) Hash() (string, error) {
	b, err := json.Marshal(rev)
	if err != nil {
		return "", fmt.Errorf("encode revision: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// Import is where a cluster's VM reads its disks from during a Cold move:
// every dataVolumeTemplate named in URLs imports over HTTP from the
// source cluster's VirtualMachineExport instead of its own source, as
// KubeVirt documents importing an export on another cluster.
type Import struct {
	// URLs are the export's volume URLs, by DataVolume template name.
	URLs map[string]string
	// HeaderSecret is the Secret, beside the VM, holding the export
	// token header; CAConfigMap the ConfigMap holding the export proxy's
	// CA ("" when the export names none).
	HeaderSecret, CAConfigMap string
	// Blank makes every template a blank disk instead (URLs unused): the
	// receiver of a live migration, whose disks the migration fills.
	Blank bool
}

// dataVolumesParam is the element key of the dataVolumeTemplates of each
// cluster (base64 JSON, "" for the definition's own), present only while
// some target imports its disks.
const dataVolumesParam = "{{.dataVolumeTemplates}}"

// runStrategyParam is the element key of the run strategy of each
// cluster, present only while some target's is held.
const runStrategyParam = "{{.runStrategy}}"

// revisionParam is the element key of each cluster's revision, present
// with spec.rollout: the fleetvm-vm chart renders revisions[revision]
// when set (vm otherwise) and labels the VM with it.
const revisionParam = "{{.revision}}"

// holdParam is the element key of each cluster's move hold, present with
// the run strategies: the fleetvm-vm chart (value hold), a git source's
// Helm chart (fleetvm.hold) or kustomize patch sets it as the VM's
// annotation fleetv1alpha1.AnnotationHold.
const holdParam = "{{.hold}}"

// immediateBindAnnotation asks CDI to bind a DataVolume's claim and
// import at once, on storage whose binding mode is WaitForFirstConsumer.
const immediateBindAnnotation = "cdi.kubevirt.io/storage.bind.immediate.requested"

// kubevirtFilledPointers are the fields of a VirtualMachine that KubeVirt
// fills in on the cluster when the VM definition leaves them empty. Argo
// CD must not count them as drift: it would start a self-heal sync on
// every Application right after its first sync, and find the same fields
// filled in again after each one.
//
//   - firmware uuid: virt-controller's firmware controller (KubeVirt 1.6
//     and later) writes one into every VM without it; virt-api's mutating
//     webhook (1.7 and later) sets a random one when the VM is created.
//   - firmware serial: virt-api's mutating webhook (1.7 and later), at
//     creation.
//   - machine type and architecture: virt-api's mutating webhook defaults
//     both from the cluster's configuration, at creation and update.
//   - the template's kubevirt.io/pci-topology-version annotation: virt-api's
//     mutating webhook (1.8 and later), at creation.
//   - instancetype and preference revisionName: KubeVirt up to 1.4 records
//     the ControllerRevision it expanded in the VM's spec.
var kubevirtFilledPointers = []string{
	"/spec/template/spec/domain/firmware/uuid",
	"/spec/template/spec/domain/firmware/serial",
	"/spec/template/spec/domain/machine/type",
	"/spec/template/spec/architecture",
	"/spec/template/metadata/annotations/kubevirt.io~1pci-topology-version",
	"/spec/instancetype/revisionName",
	"/spec/preference/revisionName",
}

// Renderer renders FleetVirtualMachines' ApplicationSets with the hub's
// settings.
type Renderer struct {
	// ArgoNamespace is where the ApplicationSet and its Applications live.
	ArgoNamespace string
	// ImageNamespace is where FleetDiskImages are imported on the clusters.
	ImageNamespace string
	// Chart is where Argo CD fetches the fleetvm-vm chart of inline templates.
	Chart ChartSource
}

// ChartSource is where Argo CD fetches the fleetvm-vm Helm chart: a git
// repository and path (the chart ships in deploy/charts/fleetvm-vm), or a
// Helm repository and chart name.
type ChartSource struct {
	RepoURL        string
	Path           string
	Chart          string
	TargetRevision string
}

// ApplicationSet builds the ApplicationSet of a FleetVirtualMachine:
// one Application per target. The targets are FleetVM's decision (placement.Decide):
// the clusters the VM runs on and stays on, whether or not the OCM
// scheduler would pick them again now, and the new ones it picked. A list
// generator carries them, so a cluster drops out of Argo CD's view only
// when FleetVM removes it, never because a PlacementDecision changed, and
// a change reaches Argo CD with the ApplicationSet's own update.
func (r Renderer) ApplicationSet(fvm *fleetv1alpha1.FleetVirtualMachine, project string, targets []Target) (*argoapp.ApplicationSet, error) {
	key := client.ObjectKeyFromObject(fvm)
	name := ChildName(key)
	vm := vmclaim.Identity(fvm)
	d := fvm.Spec.Delivery

	labels := OwnerLabels(fvm)
	appLabels := OwnerLabels(fvm)
	appLabels[fleetv1alpha1.LabelCluster] = "{{.name}}"

	spec := argoapp.ApplicationSpec{
		Project:     project,
		Destination: argoapp.ApplicationDestination{Name: "{{.name}}", Namespace: vm.Namespace},
		SyncPolicy:  SyncPolicy(d),
		// A git source's VM definition is not known here: every field
		// KubeVirt may fill in is left out of the diff.
		IgnoreDifferences: KubevirtFilledFields(nil),
	}
	// While a move holds a cluster's VM in another state than
	// spec.runStrategy, every element carries its run strategy; otherwise
	// none does, and the ApplicationSet is as it always was.
	held, importing := false, false
	for _, t := range targets {
		held = held || t.RunStrategy != ""
		importing = importing || t.Import != nil
	}
	if importing && fvm.Spec.Template == nil {
		return nil, fmt.Errorf("a VM from git cannot import its disks from an export")
	}
	revisions, err := r.revisions(fvm, targets)
	if err != nil {
		return nil, err
	}
	var templatePatch *string
	runStrategy := string(fvm.Spec.RunStrategy)
	if held {
		runStrategy = runStrategyParam
	}
	elements := make([]apiextensionsv1.JSON, 0, len(targets))
	for _, t := range targets {
		// A map marshals with sorted keys, as the API server stores it,
		// so an unchanged list compares equal.
		el := map[string]string{"name": t.Name, "environment": escapeTemplate(t.Environment)}
		if held {
			el["runStrategy"] = string(cmp.Or(t.RunStrategy, fvm.Spec.RunStrategy))
			el["hold"] = escapeTemplate(t.Hold)
		}
		if t.Revision != nil {
			el["revision"] = strconv.FormatInt(t.Revision.Number, 10)
		}
		if importing {
			el["dataVolumeTemplates"] = ""
			if t.Import != nil {
				dvs, err := r.importedDataVolumes(fvm, vm.Name, vm.Namespace, t.Import)
				if err != nil {
					return nil, err
				}
				el["dataVolumeTemplates"] = dvs
			}
		}
		raw, err := json.Marshal(el)
		if err != nil {
			return nil, err
		}
		elements = append(elements, apiextensionsv1.JSON{Raw: raw})
	}

	switch {
	case fvm.Spec.Template != nil:
		values, err := r.chartValues(fvm, vm.Name, vm.Namespace, revisions)
		if err != nil {
			return nil, err
		}
		var def map[string]any
		if err := json.Unmarshal(fvm.Spec.Template.Raw, &def); err != nil {
			return nil, fmt.Errorf("decode spec.template: %w", err)
		}
		spec.IgnoreDifferences = KubevirtFilledFields(def)
		spec.Source = &argoapp.ApplicationSource{
			RepoURL:        r.Chart.RepoURL,
			Path:           r.Chart.Path,
			Chart:          r.Chart.Chart,
			TargetRevision: r.Chart.TargetRevision,
			Helm: &argoapp.ApplicationSourceHelm{
				ReleaseName:  ReleaseName(vm.Name),
				ValuesObject: &runtime.RawExtension{Raw: values},
				Parameters:   []argoapp.HelmParameter{{Name: "cluster", Value: "{{.name}}"}},
			},
		}
		if held {
			// Argo CD's parameters win over valuesObject.
			spec.Source.Helm.Parameters = append(spec.Source.Helm.Parameters, argoapp.HelmParameter{Name: "vm.spec.runStrategy", Value: runStrategy},
				argoapp.HelmParameter{Name: "hold", Value: holdParam, ForceString: true})
		}
		if revisions != nil {
			spec.Source.Helm.Parameters = append(spec.Source.Helm.Parameters,
				argoapp.HelmParameter{Name: "revision", Value: revisionParam, ForceString: true})
		}
		if importing {
			// The fleetvm-vm chart replaces the VM's dataVolumeTemplates
			// with these when set.
			spec.Source.Helm.Parameters = append(spec.Source.Helm.Parameters,
				argoapp.HelmParameter{Name: "dataVolumeTemplates", Value: dataVolumesParam, ForceString: true})
		}
	default:
		spec.Source = r.gitSource(fvm, fvm.Spec.Source, runStrategy, held, revisions != nil, escapeTemplate)
		if len(revisions) > 0 {
			patch, err := r.gitRevisionsPatch(fvm, runStrategy, held, revisions)
			if err != nil {
				return nil, err
			}
			templatePatch = &patch
		}
	}

	appSet := &argoapp.ApplicationSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   r.ArgoNamespace,
			Labels:      labels,
			Annotations: map[string]string{PlacementAnnotation: name},
		},
		Spec: argoapp.ApplicationSetSpec{
			GoTemplate:        true,
			GoTemplateOptions: []string{"missingkey=error"},
			TemplatePatch:     templatePatch,
			Generators:        []argoapp.ApplicationSetGenerator{{List: &argoapp.ListGenerator{Elements: elements}}},
			Template: argoapp.ApplicationSetTemplate{
				ApplicationSetTemplateMeta: argoapp.ApplicationSetTemplateMeta{
					// "<ApplicationSet>.<cluster>": cluster names hold no
					// dot, so no two FleetVMs' Applications share a name.
					Name:      name + ".{{.name}}",
					Namespace: r.ArgoNamespace,
					Labels:    appLabels,
				},
				Spec: spec,
			},
			IgnoreApplicationDifferences: applicationsLeftToFleetVM(),
			SyncPolicy: &argoapp.ApplicationSetSyncPolicy{
				// Argo CD never deletes an Application on its own. FleetVM
				// removes Applications deliberately, after the grace period
				// or when the FleetVirtualMachine is deleted.
				ApplicationsSync: ptr.To(argoapp.ApplicationsSyncPolicyCreateUpdate),
				// Applications never carry the resources finalizer from the
				// template, so no accidental delete removes a VM. FleetVM adds
				// the finalizer right before it deletes an Application whose
				// VM must go.
				PreserveResourcesOnDeletion: true,
			},
		},
	}
	return appSet, nil
}

// applicationsLeftToFleetVM are the fields of its Applications that the
// ApplicationSet controller leaves as they are (ignoreApplicationDifferences)
// once they exist: their finalizers and owner references, which only
// FleetVM changes then (and Argo CD's application controller, which takes
// its resources finalizer off once it removed the VM).
//
// Argo CD's ApplicationSet controller writes each Application it generates
// with a merge patch computed from its cached copy, without a
// resourceVersion, that sets the finalizers to the template's (none) and
// puts its controller reference back; and it does so from its cached
// ApplicationSet, which may not show a deletion yet. So an ApplicationSet
// FleetVM has just deleted and released could still rewrite its
// Applications for a moment: take off the resources finalizer FleetVM had
// just added to an Application whose VM must go (the Application was then
// deleted at once, its VM left running on the cluster, still reported, and
// the FleetVirtualMachine held by its finalizer for ever), or give a
// released Application its owner reference back (the garbage collector
// then deleted it along with the ApplicationSet, VM left).
func applicationsLeftToFleetVM() argoapp.ApplicationSetIgnoreDifferences {
	return argoapp.ApplicationSetIgnoreDifferences{{JSONPointers: []string{"/metadata/finalizers", "/metadata/ownerReferences"}}}
}

// Targets are the clusters an ApplicationSet FleetVM wrote delivers
// to: the names in its list generator (of the hub's cached copy, the
// names the cache kept of them, TrimApplicationSet).
func Targets(appSet *argoapp.ApplicationSet) []string {
	if targets, ok := cachedTargets(appSet); ok {
		return targets
	}
	var out []string
	for _, g := range appSet.Spec.Generators {
		if g.List == nil {
			continue
		}
		for _, e := range g.List.Elements {
			var t Target
			if json.Unmarshal(e.Raw, &t) == nil {
				out = append(out, t.Name)
			}
		}
	}
	return out
}

// ReleaseName is the Helm release name of an inline template's chart. The
// fleetvm-vm chart names nothing after it, so any valid name works: the
// VM's name when Helm accepts it (at most 53 characters), else a shortened
// one with a hash.
func ReleaseName(vmName string) string {
	const helmMax = 53
	if len(vmName) <= helmMax {
		return vmName
	}
	sum := sha256.Sum256([]byte(vmName))
	return strings.TrimRight(vmName[:helmMax-HashLength-1], "-.") + "-" + hex.EncodeToString(sum[:])[:HashLength]
}

// gitSource is the Application source of a git source, its strings
// escaped with esc. With revisions (spec.rollout), each VM is labelled
// with its cluster's revision (fleetv1alpha1.LabelRevision): through the
// kustomize patch, or the Helm parameter fleetvm.revision, which the
// chart sets as the label.
func (r Renderer) gitSource(fvm *fleetv1alpha1.FleetVirtualMachine, src *fleetv1alpha1.GitSource, runStrategy string, held, revisions bool, esc func(string) string) *argoapp.ApplicationSource {
	out := &argoapp.ApplicationSource{
		RepoURL:        src.RepoURL,
		Path:           strings.ReplaceAll(esc(src.Path), esc(environmentPlaceholder), "{{.environment}}"),
		TargetRevision: esc(src.TargetRevision),
	}
	if src.Helm == nil {
		out.Kustomize = r.kustomize(fvm, src, runStrategy, held, revisions, esc)
		return out
	}
	vm := vmclaim.Identity(fvm)
	out.Helm = &argoapp.ApplicationSourceHelm{
		ReleaseName: vm.Name,
		ValueFiles:  mapStrings(src.Helm.ValueFiles, esc),
		Values:      esc(src.Helm.Values),
		Parameters: []argoapp.HelmParameter{
			{Name: "fleetvm.cluster", Value: "{{.name}}"},
			{Name: "fleetvm.runStrategy", Value: runStrategy},
		},
	}
	if held {
		out.Helm.Parameters = append(out.Helm.Parameters, argoapp.HelmParameter{Name: "fleetvm.hold", Value: holdParam, ForceString: true})
	}
	if revisions {
		out.Helm.Parameters = append(out.Helm.Parameters, argoapp.HelmParameter{Name: "fleetvm.revision", Value: revisionParam, ForceString: true})
	}
	return out
}

// gitRevisionsPatch is the ApplicationSet's templatePatch while some
// clusters are given an older revision of a git source: for each such
// revision, the strategic merge patch that turns the template's source
// (the latest revision) into that revision's, chosen by the element's
// revision. Argo CD renders it per Application and patches the
// Application with it; a cluster on the latest revision gets an empty
// patch. Argo CD renders the patch as a Go template too: strings are
// escaped with a raw-string action, which survives JSON.
func (r Renderer) gitRevisionsPatch(fvm *fleetv1alpha1.FleetVirtualMachine, runStrategy string, held bool, revisions map[int64]*Revision) (string, error) {
	latest, err := json.Marshal(r.gitSource(fvm, fvm.Spec.Source, runStrategy, held, true, escapeTemplateJSON))
	if err != nil {
		return "", fmt.Errorf("encode source: %w", err)
	}
	numbers := slices.Sorted(maps.Keys(revisions))
	var b strings.Builder
	for i, n := range slices.Backward(numbers) {
		older, err := json.Marshal(r.gitSource(fvm, revisions[n].Source, runStrategy, held, true, escapeTemplateJSON))
		if err != nil {
			return "", fmt.Errorf("encode revision %d's source: %w", n, err)
		}
		patch, err := strategicpatch.CreateTwoWayMergePatch(latest, older, argoapp.ApplicationSource{})
		if err != nil {
			return "", fmt.Errorf("revision %d's source patch: %w", n, err)
		}
		if i == len(numbers)-1 {
			b.WriteString("{{- if eq .revision \"")
		} else {
			b.WriteString("{{- else if eq .revision \"")
		}
		fmt.Fprintf(&b, "%d\" }}\n{\"spec\":{\"source\":%s}}\n", n, patch)
	}
	b.WriteString("{{- else }}\n{}\n{{- end }}\n")
	return b.String(), nil
}

// kustomize makes every VM of a git source carry the FleetVM and cluster
// labels, and forces spec.runStrategy over what git says; with revisions,
// it labels each VM with its cluster's revision.
func (r Renderer) kustomize(fvm *fleetv1alpha1.FleetVirtualMachine, src *fleetv1alpha1.GitSource, runStrategy string, held, revisions bool, esc func(string) string) *argoapp.ApplicationSourceKustomize {
	k := &argoapp.ApplicationSourceKustomize{CommonLabels: map[string]string{}}
	if o := src.Kustomize; o != nil {
		k.NamePrefix = esc(o.NamePrefix)
		for key, v := range o.CommonLabels {
			k.CommonLabels[esc(key)] = esc(v)
		}
	}
	for key, v := range OwnerLabels(fvm) {
		k.CommonLabels[key] = v
	}
	k.CommonLabels[fleetv1alpha1.LabelCluster] = "{{.name}}"
	meta := "metadata:\n  name: any\n"
	if revisions {
		meta += fmt.Sprintf("  labels:\n    %s: %q\n", fleetv1alpha1.LabelRevision, revisionParam)
	}
	if held {
		meta += fmt.Sprintf("  annotations:\n    %s: %q\n", fleetv1alpha1.AnnotationHold, holdParam)
	}
	k.Patches = []argoapp.KustomizePatch{{
		Target: &argoapp.KustomizeSelector{KustomizeResID: argoapp.KustomizeResID{
			KustomizeGvk: argoapp.KustomizeGvk{Group: "kubevirt.io", Kind: "VirtualMachine"},
		}},
		Patch: fmt.Sprintf("apiVersion: kubevirt.io/v1\nkind: VirtualMachine\n%sspec:\n  running: null\n  runStrategy: %s\n", meta, runStrategy),
	}}
	return k
}

// chartValues renders the Helm values of the fleetvm-vm chart: the VM as it
// must land on every cluster (name and namespace defaulted, FleetVM labels,
// spec.runStrategy winning over the template), escaped so the
// ApplicationSet's Go templating leaves it untouched.
//
// With spec.rollout (revisions not nil), revisions holds every revision
// other than the latest that a cluster is still given: the chart renders
// those clusters' VM from values.revisions.
func (r Renderer) chartValues(fvm *fleetv1alpha1.FleetVirtualMachine, vmName, vmNamespace string, revisions map[int64]*Revision) ([]byte, error) {
	vm, err := r.renderedVM(fvm, vmName, vmNamespace)
	if err != nil {
		return nil, err
	}
	values := map[string]any{"vm": escapeValue(vm)}
	if len(revisions) > 0 {
		others := map[string]any{}
		for n, rev := range revisions {
			old := fvm.DeepCopy()
			old.Spec.Template, old.Spec.DiskImages = rev.Template, rev.DiskImages
			vm, err := r.renderedVM(old, vmName, vmNamespace)
			if err != nil {
				return nil, fmt.Errorf("revision %d: %w", n, err)
			}
			others[strconv.FormatInt(n, 10)] = escapeValue(vm)
		}
		values["revisions"] = others
	}
	b, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("encode chart values: %w", err)
	}
	return b, nil
}

// revisions are the revisions other than the latest (fvm's spec, whose
// number its status.rollout records) that targets are given; nil without
// spec.rollout, empty when every target is given the latest. Every target
// has a revision with spec.rollout, none without.
func (r Renderer) revisions(fvm *fleetv1alpha1.FleetVirtualMachine, targets []Target) (map[int64]*Revision, error) {
	if fvm.Spec.Rollout == nil {
		return nil, nil
	}
	latest := fvm.Status.Rollout
	if latest == nil {
		return nil, fmt.Errorf("spec.rollout is set and status.rollout records no revision yet")
	}
	out := map[int64]*Revision{}
	for _, t := range targets {
		switch {
		case t.Revision == nil:
			return nil, fmt.Errorf("cluster %s is given no revision", t.Name)
		case t.Revision.Number != latest.Revision:
			if fvm.Spec.Template != nil && t.Revision.Template == nil {
				return nil, fmt.Errorf("revision %d has no template", t.Revision.Number)
			}
			if fvm.Spec.Source != nil && t.Revision.Source == nil {
				return nil, fmt.Errorf("revision %d has no git source", t.Revision.Number)
			}
			out[t.Revision.Number] = t.Revision
		}
	}
	return out, nil
}

// renderedVM is the VirtualMachine the chart renders, before escaping.
func (r Renderer) renderedVM(fvm *fleetv1alpha1.FleetVirtualMachine, vmName, vmNamespace string) (map[string]any, error) {
	var vm map[string]any
	if err := json.Unmarshal(fvm.Spec.Template.Raw, &vm); err != nil {
		return nil, fmt.Errorf("decode spec.template: %w", err)
	}
	meta, _ := vm["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	for _, f := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink", "ownerReferences"} {
		delete(meta, f)
	}
	meta["name"] = vmName
	meta["namespace"] = vmNamespace
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	for k, v := range OwnerLabels(fvm) {
		labels[k] = v
	}
	meta["labels"] = labels
	vm["metadata"] = meta
	spec, _ := vm["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	delete(spec, "running")
	spec["runStrategy"] = string(fvm.Spec.RunStrategy)
	r.pointAtImages(fvm, spec)
	vm["spec"] = spec
	delete(vm, "status")
	return vm, nil
}

// importedDataVolumes is the VM's spec.dataVolumeTemplates as the chart
// values render them, with every template imp names reading from the
// export instead (base64 of their JSON): an http source with the token
// header and the proxy's CA, and no sourceRef.
func (r Renderer) importedDataVolumes(fvm *fleetv1alpha1.FleetVirtualMachine, vmName, vmNamespace string, imp *Import) (string, error) {
	vm, err := r.renderedVM(fvm, vmName, vmNamespace)
	if err != nil {
		return "", err
	}
	spec, _ := vm["spec"].(map[string]any)
	templates, _ := spec["dataVolumeTemplates"].([]any)
	for _, e := range templates {
		t, _ := e.(map[string]any)
		if t == nil {
			continue
		}
		meta, _ := t["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		url, ok := imp.URLs[name]
		if !ok && !imp.Blank {
			continue
		}
		dvSpec, _ := t["spec"].(map[string]any)
		if dvSpec == nil {
			dvSpec = map[string]any{}
		}
		delete(dvSpec, "sourceRef")
		if imp.Blank {
			dvSpec["source"] = map[string]any{"blank": map[string]any{}}
			t["spec"] = dvSpec
			continue
		}
		http := map[string]any{"url": url, "secretExtraHeaders": []any{imp.HeaderSecret}}
		if imp.CAConfigMap != "" {
			http["certConfigMap"] = imp.CAConfigMap
		}
		dvSpec["source"] = map[string]any{"http": http}
		t["spec"] = dvSpec
		// The VM is held stopped while it imports: on storage that
		// binds at the first consumer CDI would wait for a start that
		// never comes. CDI binds and imports at once when asked.
		if meta == nil {
			meta = map[string]any{}
			t["metadata"] = meta
		}
		ann, _ := meta["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		ann[immediateBindAnnotation] = "true"
		meta["annotations"] = ann
	}
	b, err := json.Marshal(templates)
	if err != nil {
		return "", fmt.Errorf("encode dataVolumeTemplates: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// pointAtImages makes every dataVolumeTemplate that clones a FleetDiskImage
// of spec.diskImages (sourceRef kind DataSource, the FleetDiskImage's name,
// no namespace) clone the image's DataSource on the cluster instead.
//
// This is how a VM waits for its image: CDI keeps such a DataVolume
// pending until the DataSource is ready, and KubeVirt does not start a VM
// whose DataVolumes are not ready. The gate lives on the cluster, so it
// holds while the hub is down, and nothing fights Argo CD or the user over
// runStrategy (holding runStrategy per cluster would do both).
func (r Renderer) pointAtImages(fvm *fleetv1alpha1.FleetVirtualMachine, spec map[string]any) {
	listed := map[string]bool{}
	for _, d := range fvm.Spec.DiskImages {
		listed[d.Name] = true
	}
	templates, _ := spec["dataVolumeTemplates"].([]any)
	for _, t := range templates {
		tm, _ := t.(map[string]any)
		dvSpec, _ := tm["spec"].(map[string]any)
		ref, _ := dvSpec["sourceRef"].(map[string]any)
		if ref == nil || ref["kind"] != "DataSource" {
			continue
		}
		name, _ := ref["name"].(string)
		if ns, _ := ref["namespace"].(string); ns != "" || !listed[name] {
			continue
		}
		ref["namespace"] = r.ImageNamespace
		ref["name"] = diskimage.ObjectName(types.NamespacedName{Namespace: fvm.Namespace, Name: name})
	}
}

// SyncPolicy is the Applications' sync policy. The namespace is not Argo
// CD's to create (ensureNamespaces): a first sync may find it missing, so
// a failed sync is retried with back-off, for as long as it fails.
func SyncPolicy(d fleetv1alpha1.Delivery) *argoapp.SyncPolicy {
	p := &argoapp.SyncPolicy{
		Retry: &argoapp.RetryStrategy{Limit: -1, Backoff: &argoapp.Backoff{
			Duration: "5s", Factor: ptr.To(int64(2)), MaxDuration: "3m",
		}},
	}
	if d.SyncMode != fleetv1alpha1.SyncModeManual {
		p.Automated = &argoapp.SyncPolicyAutomated{
			Prune:    d.Prune == nil || *d.Prune,
			SelfHeal: d.SelfHeal == nil || *d.SelfHeal,
		}
	}
	return p
}

// KubevirtFilledFields tells Argo CD which fields of the VM to leave out
// of its diff: those of kubevirtFilledPointers that the VM definition does
// not set. For an inline template (vm, decoded) FleetVM knows which those
// are, so a field the template sets stays compared and a change of it
// reaches the clusters; for a git source (vm nil) it ignores them all.
//
// Argo CD's diff, two-way or three-way, keeps what the live object has
// beyond the desired one, so a field KubeVirt fills into an empty place is
// not drift with or without this list (TestArgoCDDiffOfAVMKubeVirtFilledIn).
// The list matters where the definition sets a value the cluster changes:
// for a git source, a machine type KubeVirt's tools move on is not
// reverted; for a template, FleetVM keeps such fields compared.
//
// RespectIgnoreDifferences stays off: Argo CD applies with a three-way
// merge, which keeps what KubeVirt filled in, and with it on a changed
// value in git would never be applied to an existing VM.
func KubevirtFilledFields(vm map[string]any) []argoapp.ResourceIgnoreDifferences {
	var pointers []string
	for _, p := range kubevirtFilledPointers {
		if !hasPointer(vm, p) {
			pointers = append(pointers, p)
		}
	}
	if len(pointers) == 0 {
		return nil
	}
	return []argoapp.ResourceIgnoreDifferences{{Group: "kubevirt.io", Kind: "VirtualMachine", JSONPointers: pointers}}
}

// pointerUnescaper decodes a JSON pointer's token (RFC 6901). Built once:
// a Replacer builds its tables on first use, and one per token was 0.9 GB
// of a 10,000-FleetVM burst's allocations.
var pointerUnescaper = strings.NewReplacer("~1", "/", "~0", "~")

// hasPointer tells whether the decoded JSON object holds a value other
// than null at the JSON pointer (RFC 6901, object members only).
func hasPointer(obj map[string]any, pointer string) bool {
	var cur any = obj
	for _, token := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[pointerUnescaper.Replace(token)]; !ok {
			return false
		}
	}
	return cur != nil
}

// escapeTemplate protects user text from the ApplicationSet's Go
// templating: "{{" becomes an action that prints "{{". A VM's cloud-init
// may hold Helm or Jinja syntax that must reach the cluster unchanged.
func escapeTemplate(s string) string {
	return strings.ReplaceAll(s, "{{", `{{"{{"}}`)
}

// escapeTemplateJSON escapes s for a Go template that is JSON text too:
// the action prints a raw string, which holds no quote to escape.
func escapeTemplateJSON(s string) string {
	return strings.ReplaceAll(s, "{{", "{{`{{`}}")
}

func mapStrings(in []string, f func(string) string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// escapeValue escapes every string and map key of a decoded JSON value.
func escapeValue(v any) any {
	switch t := v.(type) {
	case string:
		return escapeTemplate(t)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[escapeTemplate(k)] = escapeValue(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = escapeValue(val)
		}
		return out
	default:
		return v
	}
}
