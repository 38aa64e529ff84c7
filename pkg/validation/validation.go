// Package validation holds the rules of a FleetVirtualMachine that need no
// other object. The admission webhook refuses an object that breaks one;
// the controller places and delivers nothing new for an object that breaks
// one anyway (created while the webhook was off or set to Ignore, before a
// rule existed, or restored from a backup), and keeps the VMs it already
// runs. One function, so the two never disagree.
package validation

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/rollout"
	"github.com/fleetvm/fleetvm/pkg/vmtemplate"
)

// Options are the hub settings the rules depend on.
type Options struct {
	// ImageNamespace is where FleetDiskImages are imported on the
	// clusters: a template may use them only through spec.diskImages
	// (empty: not checked).
	ImageNamespace string
	// SharedImageNamespaces are namespaces on the clusters whose disks
	// every team may clone, such as OpenShift Virtualization's golden
	// images (DefaultSharedImageNamespaces). ImageNamespace is never one.
	SharedImageNamespaces []string
}

// DefaultSharedImageNamespaces are the namespaces a template may clone
// from besides its own when the hub is not told otherwise: OpenShift
// Virtualization's golden images, whose DataSources OpenShift lets every
// authenticated user clone.
func DefaultSharedImageNamespaces() []string {
	return []string{"openshift-virtualization-os-images"}
}

// HelmReleaseMax is the longest Helm release name: a git source with helm
// options is rendered as release metadata.name.
const HelmReleaseMax = 53

// FleetVirtualMachine checks fvm against every rule that needs no other
// object: its template decodes strictly into a KubeVirt VirtualMachine
// KubeVirt would accept, carries no status, names no object of another
// namespace (no other team's disks or images), lands in fvm's namespace
// and has a shape of at most capacity.MaxShapeNetworks networks; its cluster selector is valid; its
// name fits a Helm release where it is one. Each error names the field
// and the reason. The decoded VM is returned whenever it decoded.
func FleetVirtualMachine(fvm *fleetv1alpha1.FleetVirtualMachine, opts Options) (*kubevirtv1.VirtualMachine, field.ErrorList) {
	var vm *kubevirtv1.VirtualMachine
	var errs field.ErrorList
	tmplPath := field.NewPath("spec", "template")
	if fvm.Spec.Template != nil {
		var tmplErrs field.ErrorList
		vm, tmplErrs = vmtemplate.Decode(fvm.Spec.Template.Raw, tmplPath)
		errs = append(errs, tmplErrs...)
		if vm != nil {
			var top map[string]json.RawMessage
			if json.Unmarshal(fvm.Spec.Template.Raw, &top) == nil && top["status"] != nil {
				errs = append(errs, field.Forbidden(tmplPath.Child("status"), "status is reported by the clusters, not set in the template"))
			}
			errs = append(errs, namespaceReferences(vm, tmplPath, fvm.Namespace, opts)...)
			errs = append(errs, shapeNetworks(fvm, vm, tmplPath)...)
			if vm.Namespace != "" && vm.Namespace != fvm.Namespace {
				errs = append(errs, field.Forbidden(tmplPath.Child("metadata", "namespace"), fmt.Sprintf(
					"a FleetVirtualMachine delivers its VM only into its own namespace (%s): leave metadata.namespace out, or set it to %s",
					fvm.Namespace, fvm.Namespace)))
			}
		}
	}
	if sel := fvm.Spec.Placement.ClusterSelector; sel != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{},
			field.NewPath("spec", "placement", "clusterSelector"))...)
	}
	if src := fvm.Spec.Source; src != nil && src.Helm != nil && len(fvm.Name) > HelmReleaseMax {
		// A git source's Helm chart may name the VM after the release.
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), fvm.Name,
			fmt.Sprintf("must be at most %d characters with spec.source.helm: it is the Helm release name", HelmReleaseMax)))
	}
	errs = append(errs, rolloutRules(fvm)...)
	return vm, errs
}

// rolloutRules checks spec.rollout: the strategy (rollout.Validate
// refuses what OCM's helper would read as something else); and
// spec.placement.decisionStrategy, the decision groups a rollout reads
// (rollout.ValidateDecisionStrategy).
func rolloutRules(fvm *fleetv1alpha1.FleetVirtualMachine) field.ErrorList {
	path := field.NewPath("spec", "rollout")
	errs := rollout.ValidateDecisionStrategy(fvm.Spec.Placement.DecisionStrategy, fvm.Spec.Rollout,
		field.NewPath("spec", "placement", "decisionStrategy"), path)
	if fvm.Spec.Rollout == nil {
		return errs
	}
	return append(errs, rollout.Validate(fvm.Spec.Rollout, path)...)
}

// namespaceReferences refuses every reference of the VM to an object in
// another namespace of the clusters. KubeVirt and CDI resolve these in the
// namespace named, and authorize a clone as the user who created the VM:
// on a cluster that is Argo CD's account, which may read everything, so a
// template naming team-b's PVC would boot a copy of team-b's disk. What
// may be named:
//
//   - no namespace, or the FleetVirtualMachine's own (where its VM lands);
//   - opts.SharedImageNamespaces, which the operator shares with everyone;
//   - never the image namespace: every namespace's FleetDiskImages are
//     imported there. A FleetDiskImage is used by listing it in
//     spec.diskImages and naming it, without a namespace, in a sourceRef;
//     the hub points that sourceRef at the image namespace when it
//     delivers the VM (it is not part of what is checked here).
//
// The references checked are all a VirtualMachine holds: in each
// dataVolumeTemplate the clone sources (source.pvc, source.snapshot,
// sourceRef), the populator references (pvc.dataSourceRef,
// storage.dataSourceRef) and the DataVolume's own namespace. KubeVirt's
// volumes (persistentVolumeClaim, dataVolume, secrets, config maps)
// name objects of the VM's namespace only, and instancetype/preference
// name a kind in the VM's namespace or a cluster-wide one: neither has a
// namespace field. Left alone on purpose: Multus networks
// ("namespace/name", NetworkAttachmentDefinitions are shared
// infrastructure that the examples attach to, and attaching needs no
// read of another team's data) and pod affinity namespaces (a scheduling
// hint any pod may give).
func namespaceReferences(vm *kubevirtv1.VirtualMachine, path *field.Path, namespace string, opts Options) field.ErrorList {
	shared := map[string]bool{}
	for _, ns := range opts.SharedImageNamespaces {
		shared[ns] = ns != opts.ImageNamespace
	}
	var errs field.ErrorList
	check := func(p *field.Path, ns string, what string) {
		switch {
		case ns == "":
		case opts.ImageNamespace != "" && ns == opts.ImageNamespace:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"%s holds every namespace's FleetDiskImages on the clusters: name a FleetDiskImage of spec.diskImages without a namespace instead", ns)))
		case ns == namespace || shared[ns]:
		default:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"a FleetVirtualMachine in namespace %s may %s only from its own namespace: leave the namespace out (or set it to %s), or use a FleetDiskImage of spec.diskImages%s; %s is another namespace",
				namespace, what, namespace, sharedNote(opts), ns)))
		}
	}
	for i, dv := range vm.Spec.DataVolumeTemplates {
		p := path.Child("spec", "dataVolumeTemplates").Index(i)
		if dv.Namespace != "" && dv.Namespace != namespace {
			errs = append(errs, field.Forbidden(p.Child("metadata", "namespace"), fmt.Sprintf(
				"the DataVolume is created in the VM's namespace (%s): leave metadata.namespace out", namespace)))
		}
		sp := p.Child("spec")
		if src := dv.Spec.Source; src != nil {
			if src.PVC != nil {
				check(sp.Child("source", "pvc", "namespace"), src.PVC.Namespace, "clone")
			}
			if src.Snapshot != nil {
				check(sp.Child("source", "snapshot", "namespace"), src.Snapshot.Namespace, "clone")
			}
		}
		if ref := dv.Spec.SourceRef; ref != nil && ref.Namespace != nil {
			check(sp.Child("sourceRef", "namespace"), *ref.Namespace, "clone")
		}
		if pvc := dv.Spec.PVC; pvc != nil && pvc.DataSourceRef != nil && pvc.DataSourceRef.Namespace != nil {
			check(sp.Child("pvc", "dataSourceRef", "namespace"), *pvc.DataSourceRef.Namespace, "populate a volume")
		}
		if st := dv.Spec.Storage; st != nil && st.DataSourceRef != nil && st.DataSourceRef.Namespace != nil {
			check(sp.Child("storage", "dataSourceRef", "namespace"), *st.DataSourceRef.Namespace, "populate a volume")
		}
	}
	return errs
}

// sharedNote names the shared image namespaces in a refusal, if any.
func sharedNote(opts Options) string {
	var names []string
	for _, ns := range opts.SharedImageNamespaces {
		if ns != opts.ImageNamespace {
			names = append(names, ns)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return ", or a namespace the hub shares with every team (" + strings.Join(names, ", ") + ")"
}

// shapeNetworks bounds the networks of the VM's shape (its Multus
// networks and spec.placement.requiredNetworks): every agent reads every
// shape (capacity.MaxShapeNetworks).
func shapeNetworks(fvm *fleetv1alpha1.FleetVirtualMachine, vm *kubevirtv1.VirtualMachine, path *field.Path) field.ErrorList {
	nets := capacity.Networks(fvm.Namespace, append(vmtemplate.Networks(vm), fvm.Spec.Placement.RequiredNetworks...)...)
	if len(nets) <= capacity.MaxShapeNetworks {
		return nil
	}
	return field.ErrorList{field.Invalid(path.Child("spec", "template", "spec", "networks"), len(nets), fmt.Sprintf(
		"the VM attaches to %d Multus networks (with spec.placement.requiredNetworks); at most %d: every cluster's agent reads every VM shape of the fleet",
		len(nets), capacity.MaxShapeNetworks))}
}

// Update checks what an update of old into fvm may not change: the VM's
// namespace (running copies would be stranded), and, once fvm is being
// deleted, its spec (DuringDeletion).
func Update(old, fvm *fleetv1alpha1.FleetVirtualMachine) field.ErrorList {
	if fvm.DeletionTimestamp != nil {
		return DuringDeletion(old, fvm)
	}
	var errs field.ErrorList
	if old.Spec.Template != nil && fvm.Spec.Template != nil {
		p := field.NewPath("spec", "template")
		oldVM, _ := vmtemplate.Decode(old.Spec.Template.Raw, p)
		vm, _ := vmtemplate.Decode(fvm.Spec.Template.Raw, p)
		if oldVM != nil && vm != nil && oldVM.Namespace != vm.Namespace {
			errs = append(errs, field.Invalid(p.Child("metadata", "namespace"), vm.Namespace,
				"immutable: moving the VM to another namespace would strand the running copies"))
		}
	}
	return errs
}

// DeletionPolicy is the policy a deletion follows: the one the controller
// recorded when the deletion started (status.deletionPolicy), else the
// spec's as it was when the deletion began (old's).
func DeletionPolicy(old *fleetv1alpha1.FleetVirtualMachine) fleetv1alpha1.DeletionPolicy {
	if p := old.Status.DeletionPolicy; p != "" {
		return p
	}
	if old.Spec.DeletionPolicy == fleetv1alpha1.DeletionPolicyOrphan {
		return fleetv1alpha1.DeletionPolicyOrphan
	}
	return fleetv1alpha1.DeletionPolicyDelete
}

// DuringDeletion refuses every spec change of a FleetVirtualMachine that
// is being deleted. Its deletion follows the policy it started with to
// the end (the VMs are already being removed, or already left): a
// changed deletionPolicy would state something that does not happen.
// Nothing else of the spec is acted on any more, so a change of it would
// state a wish nobody carries out. Metadata (finalizers, labels) may
// change: the deletion's own last step is such an update.
func DuringDeletion(old, fvm *fleetv1alpha1.FleetVirtualMachine) field.ErrorList {
	if reflect.DeepEqual(old.Spec, fvm.Spec) {
		return nil
	}
	started := DeletionPolicy(old)
	want := fvm.Spec.DeletionPolicy
	if want == "" {
		want = fleetv1alpha1.DeletionPolicyDelete
	}
	if want != started {
		what := "the VMs are being removed from the clusters; to keep the VMs, set deletionPolicy: Orphan before deleting"
		if started == fleetv1alpha1.DeletionPolicyOrphan {
			what = "the VMs are being left running on the clusters; to remove them, set deletionPolicy: Delete before deleting"
		}
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "deletionPolicy"), fmt.Sprintf(
			"cannot change to %s: the deletion already started with deletionPolicy %s and follows it to the end: %s", want, started, what))}
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec"),
		"cannot change while the FleetVirtualMachine is being deleted: nothing is placed or delivered any more, only the deletion proceeds")}
}

// MessageMax bounds Summary's length.
const MessageMax = 1024

// Summary joins errs into one message of at most MessageMax bytes: the
// first errors in full, then how many more.
func Summary(errs field.ErrorList) string {
	var b strings.Builder
	for i, e := range errs {
		s := e.Error()
		if i > 0 {
			s = "; " + s
		}
		more := fmt.Sprintf("; and %d more", len(errs)-i)
		if b.Len()+len(s) > MessageMax-len(more) {
			if b.Len() == 0 {
				// One long error: cut it.
				b.WriteString(truncate(s, MessageMax-len(more)))
				if len(errs) > 1 {
					b.WriteString(fmt.Sprintf("; and %d more", len(errs)-1))
				}
				return b.String()
			}
			b.WriteString(more)
			return b.String()
		}
		b.WriteString(s)
	}
	return b.String()
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence,
// marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("...")
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
