package validation

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
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
		"rollout: a valid progressive strategy": {fvm: func() *fleetv1alpha1.FleetVirtualMachine {
			f := fvm("db", "", "")
			f.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
				Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt32(1)}}
			return f
		}()},
		"rollout: progressive without maxConcurrency, which OCM reads as all clusters at once": {
			fvm: func() *fleetv1alpha1.FleetVirtualMachine {
				f := fvm("db", "", "")
				f.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{}}
				return f
			}(),
			want: []string{"FieldValueRequired spec.rollout.progressive.maxConcurrency"},
		},
		"rollout: a mandatory decision group that is no group of spec.placement.decisionStrategy": {
			fvm: func() *fleetv1alpha1.FleetVirtualMachine {
				f := fvm("db", "", "")
				f.Spec.Placement.DecisionStrategy = &clusterv1beta1.DecisionStrategy{GroupStrategy: clusterv1beta1.GroupStrategy{
					DecisionGroups: []clusterv1beta1.DecisionGroup{{GroupName: "canary"}}, ClustersPerDecisionGroup: intstr.FromString("0%")}}
				f.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{
					MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{MandatoryDecisionGroups: []clusterv1alpha1.MandatoryDecisionGroup{{GroupName: "canaries"}}}}}
				return f
			}(),
			want: []string{"FieldValueInvalid spec.placement.decisionStrategy.groupStrategy.clustersPerDecisionGroup",
				"FieldValueInvalid spec.rollout.progressivePerGroup.mandatoryDecisionGroups[0].groupName"},
		},
		"rollout of a git source: its targetRevision and options are the revision": {
			fvm: func() *fleetv1alpha1.FleetVirtualMachine {
				f := fvm("db", "", "")
				f.Spec.Template = nil
				f.Spec.Source = &fleetv1alpha1.GitSource{RepoURL: "https://git.example.com/vms.git", Path: "db", TargetRevision: "v1"}
				f.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}
				return f
			}(),
		},
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
		"clone sources in another namespace": {
			fvm: fvm("db", "", dvTemplates(
				`{"metadata":{"name":"a"},"spec":{"source":{"pvc":{"namespace":"team-b","name":"secret-db-disk"}},"storage":{}}}`,
				`{"metadata":{"name":"b"},"spec":{"source":{"snapshot":{"namespace":"team-b","name":"nightly"}},"storage":{}}}`,
				`{"metadata":{"name":"c"},"spec":{"sourceRef":{"kind":"DataSource","namespace":"team-b","name":"golden"},"storage":{}}}`,
				`{"metadata":{"name":"d"},"spec":{"pvc":{"dataSourceRef":{"kind":"PersistentVolumeClaim","namespace":"team-b","name":"secret-db-disk"}}}}`,
				`{"metadata":{"name":"e"},"spec":{"storage":{"dataSourceRef":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","namespace":"kube-system","name":"etcd"}}}}`,
				`{"metadata":{"name":"f","namespace":"team-b"},"spec":{"source":{"blank":{}},"storage":{}}}`,
			)),
			want: []string{
				"FieldValueForbidden spec.template.spec.dataVolumeTemplates[0].spec.source.pvc.namespace",
				"FieldValueForbidden spec.template.spec.dataVolumeTemplates[1].spec.source.snapshot.namespace",
				"FieldValueForbidden spec.template.spec.dataVolumeTemplates[2].spec.sourceRef.namespace",
				"FieldValueForbidden spec.template.spec.dataVolumeTemplates[3].spec.pvc.dataSourceRef.namespace",
				"FieldValueForbidden spec.template.spec.dataVolumeTemplates[4].spec.storage.dataSourceRef.namespace",
				"FieldValueForbidden spec.template.spec.dataVolumeTemplates[5].metadata.namespace",
			},
		},
		"clone sources in the own namespace, without one, or in a shared image namespace": {
			fvm: fvm("db", "", dvTemplates(
				`{"metadata":{"name":"a"},"spec":{"source":{"pvc":{"namespace":"team-a","name":"disk"}},"storage":{}}}`,
				`{"metadata":{"name":"b"},"spec":{"source":{"snapshot":{"namespace":"","name":"nightly"}},"storage":{}}}`,
				`{"metadata":{"name":"c"},"spec":{"sourceRef":{"kind":"DataSource","name":"rhel9"},"storage":{}}}`,
				`{"metadata":{"name":"d"},"spec":{"sourceRef":{"kind":"DataSource","namespace":"os-images","name":"rhel9"},"storage":{}}}`,
				`{"metadata":{"name":"e","namespace":"team-a"},"spec":{"storage":{"dataSourceRef":{"kind":"PersistentVolumeClaim","namespace":"team-a","name":"disk"}}}}`,
				`{"metadata":{"name":"f"},"spec":{"source":{"http":{"url":"https://images.example/x.qcow2"}},"storage":{}}}`,
			)),
		},
		"Multus networks of another namespace are shared infrastructure": {
			fvm: fvm("db", "", `{"template":{"spec":{"domain":{"memory":{"guest":"1Gi"},"devices":{}},
				"networks":[{"name":"vlan","multus":{"networkName":"default/vlan2003"}}]}}}`),
		},
		"too many networks for one shape": {
			fvm: func() *fleetv1alpha1.FleetVirtualMachine {
				var nets []string
				for i := range capacity.MaxShapeNetworks {
					nets = append(nets, fmt.Sprintf(`{"name":"n%d","multus":{"networkName":"default/vlan%d"}}`, i, i))
				}
				f := fvm("db", "", `{"template":{"spec":{"domain":{"memory":{"guest":"1Gi"},"devices":{}},"networks":[`+strings.Join(nets, ",")+`]}}}`)
				f.Spec.Placement.RequiredNetworks = []string{"default/vlan0", "default/one-more"} // one new, one already there
				return f
			}(),
			want: []string{"FieldValueInvalid spec.template.spec.template.spec.networks"},
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
			_, errs := FleetVirtualMachine(tc.fvm, Options{ImageNamespace: imageNS, SharedImageNamespaces: []string{"os-images", imageNS}})
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

// dvTemplates is a VM spec with these dataVolumeTemplates.
func dvTemplates(templates ...string) string {
	return `{"dataVolumeTemplates":[` + strings.Join(templates, ",") + `],"template":{"spec":{"domain":{"memory":{"guest":"1Gi"},"devices":{}}}}}`
}

// TestNamespaceReferenceMessage: the refusal names the namespace the
// FleetVirtualMachine is in, what it may clone from instead, and the
// namespace it named; a FleetVirtualMachine in the image namespace still
// may not clone from it, and the image namespace is never shared.
func TestNamespaceReferenceMessage(t *testing.T) {
	f := fvm("db", "", dvTemplates(`{"metadata":{"name":"a"},"spec":{"source":{"pvc":{"namespace":"team-b","name":"secret-db-disk"}},"storage":{}}}`))
	_, errs := FleetVirtualMachine(f, Options{ImageNamespace: imageNS, SharedImageNamespaces: []string{"os-images"}})
	want := "spec.template.spec.dataVolumeTemplates[0].spec.source.pvc.namespace: Forbidden: a FleetVirtualMachine in namespace team-a may clone only from its own namespace: " +
		"leave the namespace out (or set it to team-a), or use a FleetDiskImage of spec.diskImages, or a namespace the hub shares with every team (os-images); team-b is another namespace"
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errors:\n got %v\nwant %s", errs, want)
	}
	_, errs = FleetVirtualMachine(f, Options{ImageNamespace: imageNS})
	if len(errs) != 1 || strings.Contains(errs[0].Error(), "shares") {
		t.Errorf("without shared namespaces the refusal names none: %v", errs)
	}

	inImages := fvm("db", "", dvTemplates(`{"metadata":{"name":"a"},"spec":{"sourceRef":{"kind":"DataSource","namespace":"fleetvm-images","name":"team-b.golden"},"storage":{}}}`))
	inImages.Namespace = imageNS
	_, errs = FleetVirtualMachine(inImages, Options{ImageNamespace: imageNS, SharedImageNamespaces: []string{imageNS}})
	if diff := cmp.Diff([]string{"FieldValueForbidden spec.template.spec.dataVolumeTemplates[0].spec.sourceRef.namespace"}, fieldsOf(errs)); diff != "" {
		t.Errorf("a FleetVirtualMachine in the image namespace (-want,+got):\n%s", diff)
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
