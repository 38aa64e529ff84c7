package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

const imageNS = "fleetvm-images"

// fvm is a FleetVirtualMachine team-a/name with an inline VM whose
// metadata and spec may be replaced.
func fvm(name, metadata, spec string) *fleetv1alpha1.FleetVirtualMachine {
	if metadata == "" {
		metadata = `{}`
	}
	if spec == "" {
		spec = `{"template":{"spec":{"domain":{"memory":{"guest":"1Gi"},"devices":{}}}}}`
	}
	raw := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":` + metadata + `,"spec":` + spec + `}`
	return &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec:       fleetv1alpha1.FleetVirtualMachineSpec{Template: &runtime.RawExtension{Raw: []byte(raw)}},
	}
}

// fieldsOf lists each error as "type field".
func fieldsOf(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func TestFleetVirtualMachine(t *testing.T) {
	longName := strings.Repeat("a", HelmReleaseMax+1)
	cases := map[string]struct {
		fvm  *fleetv1alpha1.FleetVirtualMachine
		want []string
	}{
		"valid": {fvm: fvm("db", "", "")},
		"unknown field in the VMI spec, which KubeVirt decodes leniently": {
			fvm:  fvm("db", "", `{"template":{"spec":{"domain":{"memory":{"guest":"1Gi"},"devices":{}},"nodeSelectr":{}}}}`),
			want: []string{"FieldValueInvalid spec.template.spec.template.spec.nodeSelectr"},
		},
		"no memory: the fit predicate could not be built": {
			fvm:  fvm("db", "", `{"template":{"spec":{"domain":{"devices":{}}}}}`),
			want: []string{"FieldValueRequired spec.template.spec.template.spec.domain.memory.guest"},
		},
		"status in the template": {
			fvm: func() *fleetv1alpha1.FleetVirtualMachine {
				f := fvm("db", "", "")
				f.Spec.Template.Raw = []byte(strings.TrimSuffix(string(f.Spec.Template.Raw), "}") + `,"status":{}}`)
				return f
			}(),
			want: []string{"FieldValueForbidden spec.template.status"},
		},
		"another namespace": {
			fvm:  fvm("db", `{"namespace":"team-b"}`, ""),
			want: []string{"FieldValueForbidden spec.template.metadata.namespace"},
		},
		"image namespace in a sourceRef and a pvc source": {
			fvm: fvm("db", "", `{"dataVolumeTemplates":[
				{"metadata":{"name":"a"},"spec":{"sourceRef":{"kind":"DataSource","name":"rhel9","namespace":"fleetvm-images"},"storage":{}}},
				{"metadata":{"name":"b"},"spec":{"source":{"pvc":{"name":"rhel9","namespace":"fleetvm-images"}},"storage":{}}}],
				"template":{"spec":{"domain":{"memory":{"guest":"1Gi"},"devices":{}}}}}`),
			want: []string{
				"FieldValueForbidden spec.template.spec.dataVolumeTemplates[0].spec.sourceRef.namespace",
				"FieldValueForbidden spec.template.spec.dataVolumeTemplates[1].spec.source.pvc.namespace",
			},
		},
		"invalid cluster selector": {
			fvm: func() *fleetv1alpha1.FleetVirtualMachine {
				f := fvm("db", "", "")
				f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Near"}}}
				return f
			}(),
			want: []string{"FieldValueInvalid spec.placement.clusterSelector.matchExpressions[0].operator"},
		},
		"name too long for a Helm release": {
			fvm: &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: longName},
				Spec: fleetv1alpha1.FleetVirtualMachineSpec{Source: &fleetv1alpha1.GitSource{
					RepoURL: "https://git.example.com/vms.git", Path: "vm", Helm: &fleetv1alpha1.HelmOptions{}}},
			},
			want: []string{"FieldValueInvalid metadata.name"},
		},
		"long name without Helm": {
			fvm: &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: longName},
				Spec:       fleetv1alpha1.FleetVirtualMachineSpec{Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.example.com/vms.git", Path: "vm"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := FleetVirtualMachine(tc.fvm, Options{ImageNamespace: imageNS})
			if diff := cmp.Diff(tc.want, fieldsOf(errs)); diff != "" {
				t.Errorf("errors (-want,+got):\n%s\n%v", diff, errs)
			}
			for _, e := range errs {
				if e.Detail == "" {
					t.Errorf("%s: no reason given", e.Field)
				}
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	now := metav1.Now()
	deleting := func(f *fleetv1alpha1.FleetVirtualMachine, policy, recorded fleetv1alpha1.DeletionPolicy) *fleetv1alpha1.FleetVirtualMachine {
		f = f.DeepCopy()
		f.DeletionTimestamp = &now
		f.Spec.DeletionPolicy = policy
		f.Status.DeletionPolicy = recorded
		return f
	}
	const (
		del    = fleetv1alpha1.DeletionPolicyDelete
		orphan = fleetv1alpha1.DeletionPolicyOrphan
	)
	base := fvm("db", "", "")
	relabelled := deleting(base, del, del)
	relabelled.Labels = map[string]string{"team": "x"}
	relabelled.Finalizers = nil
	cases := map[string]struct {
		old, new *fleetv1alpha1.FleetVirtualMachine
		want     []string
		detail   string
	}{
		"namespace moved": {
			old: base, new: fvm("db", `{"namespace":"team-a"}`, ""),
			want: []string{"FieldValueInvalid spec.template.metadata.namespace"},
		},
		"deleting: finalizer removed and labels changed": {
			old: deleting(base, del, del), new: relabelled,
		},
		"deleting with Delete: Orphan refused": {
			old: deleting(base, del, del), new: deleting(base, orphan, del),
			want:   []string{"FieldValueForbidden spec.deletionPolicy"},
			detail: "cannot change to Orphan: the deletion already started with deletionPolicy Delete and follows it to the end: the VMs are being removed from the clusters; to keep the VMs, set deletionPolicy: Orphan before deleting",
		},
		"deleting with Delete, not yet recorded: Orphan refused": {
			old: deleting(base, del, ""), new: deleting(base, orphan, ""),
			want: []string{"FieldValueForbidden spec.deletionPolicy"},
		},
		"deleting with the default, not yet recorded: Orphan refused": {
			old: deleting(base, "", ""), new: deleting(base, orphan, ""),
			want: []string{"FieldValueForbidden spec.deletionPolicy"},
		},
		"deleting with Orphan: Delete refused": {
			old: deleting(base, orphan, orphan), new: deleting(base, del, orphan),
			want:   []string{"FieldValueForbidden spec.deletionPolicy"},
			detail: "cannot change to Delete: the deletion already started with deletionPolicy Orphan and follows it to the end: the VMs are being left running on the clusters; to remove them, set deletionPolicy: Delete before deleting",
		},
		"deleting: any other spec change refused": {
			old: deleting(base, del, del), new: deleting(fvm("db", "", `{"template":{"spec":{"domain":{"memory":{"guest":"2Gi"},"devices":{}}}}}`), del, del),
			want: []string{"FieldValueForbidden spec"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := Update(tc.old, tc.new)
			if diff := cmp.Diff(tc.want, fieldsOf(errs)); diff != "" {
				t.Errorf("errors (-want,+got):\n%s\n%v", diff, errs)
			}
			if tc.detail != "" && len(errs) > 0 && errs[0].Detail != tc.detail {
				t.Errorf("detail:\n got %q\nwant %q", errs[0].Detail, tc.detail)
			}
		})
	}
}

func TestSummaryBounded(t *testing.T) {
	one := field.ErrorList{field.Invalid(field.NewPath("spec", "template"), "", "bad")}
	if got, want := Summary(one), `spec.template: Invalid value: "": bad`; got != want {
		t.Errorf("Summary of one error = %q, want %q", got, want)
	}
	var many field.ErrorList
	for i := range 500 {
		many = append(many, field.Invalid(field.NewPath("spec", "template", "spec").Index(i), "", strings.Repeat("x", 40)))
	}
	got := Summary(many)
	if len(got) > MessageMax {
		t.Errorf("Summary of 500 errors is %d bytes, more than %d", len(got), MessageMax)
	}
	if !strings.HasPrefix(got, many[0].Error()) || !strings.Contains(got, "more") {
		t.Errorf("Summary should start with the first error and count the rest: %q", got)
	}
	huge := field.ErrorList{field.Invalid(field.NewPath("spec"), "", strings.Repeat("é", 2*MessageMax))}
	if got := Summary(huge); len(got) > MessageMax || !strings.HasSuffix(got, "...") {
		t.Errorf("Summary of one huge error is %d bytes (max %d), ends %q", len(got), MessageMax, got[len(got)-10:])
	}
}
