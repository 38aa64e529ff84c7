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
	"github.com/fleetvm/fleetvm/pkg/vmtemplate"
)

// Options are the hub settings the rules depend on.
type Options struct {
	// ImageNamespace is where FleetDiskImages are imported on the
	// clusters: a template may use them only through spec.diskImages
	// (empty: not checked).
	ImageNamespace string
}

// HelmReleaseMax is the longest Helm release name: a git source with helm
// options is rendered as release metadata.name.
const HelmReleaseMax = 53

// FleetVirtualMachine checks fvm against every rule that needs no other
// object: its template decodes strictly into a KubeVirt VirtualMachine
// KubeVirt would accept, carries no status, clones from no other team's
// images and lands in fvm's namespace; its cluster selector is valid; its
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
			errs = append(errs, imageReferences(vm, tmplPath, opts.ImageNamespace)...)
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
	return vm, errs
}

// imageReferences refuses dataVolumeTemplates that clone straight from
// FleetVM's image namespace on the clusters: every tenant's images are
// imported there, so a template naming one would boot from another team's
// image. A FleetDiskImage is used by listing it in spec.diskImages and
// naming it, without a namespace, in a sourceRef.
func imageReferences(vm *kubevirtv1.VirtualMachine, path *field.Path, imageNamespace string) field.ErrorList {
	if imageNamespace == "" {
		return nil
	}
	var errs field.ErrorList
	msg := fmt.Sprintf("%s holds every namespace's FleetDiskImages on the clusters: name a FleetDiskImage of spec.diskImages without a namespace instead", imageNamespace)
	for i, dv := range vm.Spec.DataVolumeTemplates {
		p := path.Child("spec", "dataVolumeTemplates").Index(i).Child("spec")
		if ref := dv.Spec.SourceRef; ref != nil && ref.Namespace != nil && *ref.Namespace == imageNamespace {
			errs = append(errs, field.Forbidden(p.Child("sourceRef", "namespace"), msg))
		}
		if src := dv.Spec.Source; src != nil && src.PVC != nil && src.PVC.Namespace == imageNamespace {
			errs = append(errs, field.Forbidden(p.Child("source", "pvc", "namespace"), msg))
		}
	}
	return errs
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
