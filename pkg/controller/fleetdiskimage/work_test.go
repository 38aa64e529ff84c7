package fleetdiskimage

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestCredentialsScopedToTheNamespace: every namespace's images are
// imported into one namespace of the clusters, so a FleetDiskImage's
// secretRef and certConfigMap resolve there to names prefixed with its own
// namespace: team-b cannot name team-a's credentials, even by writing
// team-a's prefix itself.
func TestCredentialsScopedToTheNamespace(t *testing.T) {
	r := &Reconciler{Config: DefaultConfig()}
	cases := map[string]struct {
		ns     string
		source fleetv1alpha1.DiskImageSource
		want   func(*cdiv1beta1.DataVolumeSource) []string
		expect []string
	}{
		"http, team-a's own": {
			ns:     "team-a",
			source: fleetv1alpha1.DiskImageSource{HTTP: &fleetv1alpha1.HTTPSource{URL: "https://images.example/a.qcow2", SecretRef: "creds", CertConfigMap: "ca"}},
			want:   func(s *cdiv1beta1.DataVolumeSource) []string { return []string{s.HTTP.SecretRef, s.HTTP.CertConfigMap} },
			expect: []string{"team-a.creds", "team-a.ca"},
		},
		"http, team-b writing team-a's name": {
			ns:     "team-b",
			source: fleetv1alpha1.DiskImageSource{HTTP: &fleetv1alpha1.HTTPSource{URL: "https://images.example/a.qcow2", SecretRef: "team-a.creds"}},
			want:   func(s *cdiv1beta1.DataVolumeSource) []string { return []string{s.HTTP.SecretRef, s.HTTP.CertConfigMap} },
			expect: []string{"team-b.team-a.creds", ""},
		},
		"registry": {
			ns:     "team-a",
			source: fleetv1alpha1.DiskImageSource{Registry: &fleetv1alpha1.RegistrySource{URL: "docker://quay.example/img:1", SecretRef: "pull"}},
			want:   func(s *cdiv1beta1.DataVolumeSource) []string { return []string{*s.Registry.SecretRef} },
			expect: []string{"team-a.pull"},
		},
		"s3": {
			ns:     "team-a",
			source: fleetv1alpha1.DiskImageSource{S3: &fleetv1alpha1.S3Source{URL: "s3://bucket/img", SecretRef: "s3"}},
			want:   func(s *cdiv1beta1.DataVolumeSource) []string { return []string{s.S3.SecretRef} },
			expect: []string{"team-a.s3"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fdi := &fleetv1alpha1.FleetDiskImage{
				ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "golden"},
				Spec:       fleetv1alpha1.FleetDiskImageSpec{Source: tc.source, Storage: fleetv1alpha1.DiskImageStorage{Size: resource.MustParse("10Gi")}},
			}
			work, err := r.desiredWork(fdi, "prod-a")
			if err != nil {
				t.Fatal(err)
			}
			var dv cdiv1beta1.DataVolume
			for _, m := range work.Spec.Workload.Manifests {
				var probe metav1.TypeMeta
				if json.Unmarshal(m.Raw, &probe) == nil && probe.Kind == "DataVolume" {
					if err := json.Unmarshal(m.Raw, &dv); err != nil {
						t.Fatal(err)
					}
				}
			}
			if dv.Spec.Source == nil {
				t.Fatal("no DataVolume in the ManifestWork")
			}
			got := tc.want(dv.Spec.Source)
			for i := range got {
				if got[i] != tc.expect[i] {
					t.Errorf("credential %d = %q, want %q", i, got[i], tc.expect[i])
				}
			}
		})
	}
}
