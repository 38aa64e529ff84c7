package fleetvirtualmachine

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from what the code generates")

// TestGeneratedObjects: the candidate Placement and the ApplicationSet FleetVM writes
// for each kind of FleetVirtualMachine, compared whole with the files in
// testdata/golden (go test -run TestGeneratedObjects -update rewrites them;
// review the diff like code). A change in what reaches OCM or Argo CD shows
// here, line by line.
func TestGeneratedObjects(t *testing.T) {
	inline := func(ns, name string) *fleetv1alpha1.FleetVirtualMachine {
		return &fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fleetv1alpha1.FleetVirtualMachineSpec{
				Template: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
					"metadata":{"labels":{"app":"web"},"uid":"dropped","resourceVersion":"dropped"},
					"spec":{"running":true,"template":{"spec":{"domain":{"cpu":{"cores":2},"memory":{"guest":"4Gi"},
						"resources":{"requests":{"memory":"4Gi"}},"devices":{}},
						"volumes":[{"name":"cloudinit","cloudInitNoCloud":{"userData":"#cloud-config\npassword: {{ not-a-template }}"}}]}},
					"dataVolumeTemplates":[{"metadata":{"name":"root"},"spec":{"sourceRef":{"kind":"DataSource","name":"rhel9"},"storage":{"resources":{"requests":{"storage":"30Gi"}}}}}]}}`)},
				Placement: fleetv1alpha1.FleetPlacement{
					ClusterSets: []string{"prod"}, Environment: "prod", Clusters: ptr.To[int32](2),
					Prioritizer: fleetv1alpha1.PrioritizerFreeCapacity,
				},
				RunStrategy: fleetv1alpha1.RunStrategyAlways,
				DiskImages:  []fleetv1alpha1.DiskImageReference{{Name: "rhel9"}},
			},
		}
	}
	cases := map[string]struct {
		fvm     *fleetv1alpha1.FleetVirtualMachine
		sets    []string
		project string
		targets []delivery.Target
	}{
		"inline-new": {
			fvm: inline("team-a", "web"), sets: []string{"prod"}, project: "fleetvm-team-a",
		},
		"inline-running-on-two": {
			fvm: inline("team-a", "web"), sets: []string{"prod"}, project: "fleetvm-team-a",
			targets: []delivery.Target{{Name: "prod-a", Environment: "prod"}, {Name: "prod-b", Environment: "prod"}},
		},
		// team-a/x and team/a-x join to the same "team-a-x": their objects
		// must not share a name.
		"collide-team-a.x": {
			fvm: inline("team-a", "x"), sets: []string{"prod"}, project: "fleetvm-team-a",
			targets: []delivery.Target{{Name: "prod-a", Environment: "prod"}},
		},
		"collide-team.a-x": {
			fvm: inline("team", "a-x"), sets: []string{"prod"}, project: "fleetvm-team",
			targets: []delivery.Target{{Name: "prod-a", Environment: "prod"}},
		},
		"git-kustomize": {
			fvm: &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "server2019"},
				Spec: fleetv1alpha1.FleetVirtualMachineSpec{
					Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "server2019/overlays/{{environment}}", TargetRevision: "v1.2.0",
						Kustomize: &fleetv1alpha1.KustomizeOptions{NamePrefix: "w-", CommonLabels: map[string]string{"team": "b"}}},
					Placement: fleetv1alpha1.FleetPlacement{
						ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}},
						Tolerations:     nil,
					},
					RunStrategy: fleetv1alpha1.RunStrategyHalted,
					Delivery:    fleetv1alpha1.Delivery{Project: "team-b-shared", SyncMode: fleetv1alpha1.SyncModeManual},
				},
			},
			sets: []string{"default"}, project: "team-b-shared",
			targets: []delivery.Target{{Name: "dev-a", Environment: "dev"}},
		},
		"git-helm": {
			fvm: &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "db"},
				Spec: fleetv1alpha1.FleetVirtualMachineSpec{
					Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/charts.git", Path: "vm",
						Helm: &fleetv1alpha1.HelmOptions{ValueFiles: []string{"values-{{environment}}.yaml"}, Values: "password: {{ .Values.secret }}\n"}},
					Placement: fleetv1alpha1.FleetPlacement{Environment: "prod", Prioritizer: fleetv1alpha1.PrioritizerSteady,
						RequiredNetworks: []string{"default/vlan2003"}},
					RunStrategy: fleetv1alpha1.RunStrategyAlways,
				},
			},
			sets: []string{"prod", "prod-eu"}, project: "fleetvm-team-c",
			targets: []delivery.Target{{Name: "prod-a", Environment: "prod"}},
		},
	}
	r := &Reconciler{Config: DefaultConfig()}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			placement := r.candidatePlacement(tc.fvm, tc.sets)
			appSet, err := r.renderer().ApplicationSet(tc.fvm, tc.project, tc.targets)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			for _, o := range []any{placement, appSet} {
				b, err := yaml.Marshal(o)
				if err != nil {
					t.Fatal(err)
				}
				got = append(append(got, "---\n"...), b...)
			}
			path := filepath.Join("testdata", "golden", name+".yaml")
			if *updateGolden {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-golden,+generated); if intended, rerun with -update and review:\n%s", path, diff)
			}
		})
	}
}
