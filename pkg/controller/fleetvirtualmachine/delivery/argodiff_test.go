package delivery

import (
	"encoding/json"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	"github.com/argoproj/gitops-engine/pkg/diff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestArgoCDDiffOfAVMKubeVirtFilledIn runs Argo CD's own diff on a VM as
// FleetVM delivers it and as KubeVirt leaves it (firmware UUID and serial,
// machine type, architecture filled in).
//
// What it shows: fields KubeVirt adds are never drift for Argo CD, with or
// without ignoreDifferences, whether Argo CD applied the VM (three-way diff
// against the last-applied annotation) or not (two-way, an adopted VM):
// both keep what the live object has beyond the desired one. Drift comes
// from a value the definition sets and the cluster changes. For an inline
// template FleetVM keeps those compared, so a change reaches the clusters;
// for a git source, whose definition FleetVM cannot read, the ignore list
// keeps Argo CD from reverting what KubeVirt's own tools change, such as a
// machine type moved on by virtctl adm update-machine-type.
func TestArgoCDDiffOfAVMKubeVirtFilledIn(t *testing.T) {
	const desired = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"team-a"},
"spec":{"runStrategy":"Always","template":{"spec":{"domain":{"cpu":{"cores":1},"memory":{"guest":"1Gi"},
"firmware":{"bootloader":{"efi":{}}}}}}}}`
	const filled = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"web","namespace":"team-a"},
"spec":{"runStrategy":"Always","template":{"spec":{"architecture":"amd64","domain":{"cpu":{"cores":1},"memory":{"guest":"1Gi"},
"machine":{"type":"q35"},
"firmware":{"bootloader":{"efi":{}},"uuid":"7b1f7c2e-4c51-5b43-9a55-0d0f5a1e8c11","serial":"0d0f5a1e-8c11-4c51-9a55-7b1f7c2e5b43"}}}}}}`

	var def map[string]any
	if err := json.Unmarshal([]byte(desired), &def); err != nil {
		t.Fatal(err)
	}
	shipped, err := normalizers.NewIgnoreNormalizer(*asArgo[[]argov1alpha1.ResourceIgnoreDifferences](t, KubevirtFilledFields(def)), nil, normalizers.IgnoreNormalizerOpts{})
	if err != nil {
		t.Fatal(err)
	}
	forGit, err := normalizers.NewIgnoreNormalizer(*asArgo[[]argov1alpha1.ResourceIgnoreDifferences](t, KubevirtFilledFields(nil)), nil, normalizers.IgnoreNormalizerOpts{})
	if err != nil {
		t.Fatal(err)
	}
	obj := func(s string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(s)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	appliedByArgoCD := func() *unstructured.Unstructured {
		u := obj(filled)
		u.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": desired})
		return u
	}
	const gitMachine = "pc-q35-rhel8.6.0"
	updatedMachine := func() *unstructured.Unstructured {
		u := obj(filled)
		if err := unstructured.SetNestedField(u.Object, "pc-q35-rhel9.6.0", "spec", "template", "spec", "domain", "machine", "type"); err != nil {
			t.Fatal(err)
		}
		return u
	}
	fromGit := obj(desired)
	if err := unstructured.SetNestedField(fromGit.Object, gitMachine, "spec", "template", "spec", "domain", "machine", "type"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		desired, live *unstructured.Unstructured
		normalizer    diff.Normalizer
		drift         bool
	}{
		{"applied by Argo CD, no ignoreDifferences", obj(desired), appliedByArgoCD(), diff.GetNoopNormalizer(), false},
		{"applied by Argo CD, FleetVM's ignoreDifferences", obj(desired), appliedByArgoCD(), shipped, false},
		{"adopted, no ignoreDifferences", obj(desired), obj(filled), diff.GetNoopNormalizer(), false},
		{"adopted, FleetVM's ignoreDifferences", obj(desired), obj(filled), shipped, false},
		{"a value the template sets, changed on the cluster, stays drift", obj(desired), func() *unstructured.Unstructured {
			u := obj(filled)
			if err := unstructured.SetNestedField(u.Object, int64(2), "spec", "template", "spec", "domain", "cpu", "cores"); err != nil {
				t.Fatal(err)
			}
			return u
		}(), shipped, true},
		{"git source's machine type updated on the cluster, no ignoreDifferences", fromGit, updatedMachine(), diff.GetNoopNormalizer(), true},
		{"git source's machine type updated on the cluster, FleetVM's ignoreDifferences", fromGit, updatedMachine(), forGit, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := diff.Diff(tc.desired, tc.live, diff.WithNormalizer(tc.normalizer))
			if err != nil {
				t.Fatal(err)
			}
			if res.Modified != tc.drift {
				t.Errorf("Argo CD finds drift: %t, want %t\npredicted live: %s\nlive: %s", res.Modified, tc.drift, res.PredictedLive, res.NormalizedLive)
			}
		})
	}
}
