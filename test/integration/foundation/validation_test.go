package foundation

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// seedVM returns a VirtualMachine of seed 000, unchanged, as YAML indented
// to sit under spec.template.
func seedVM(t *testing.T, name string) string {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "test", "testdata", "seed000", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return indent(string(b), "    ")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

const minimalVM = `
    apiVersion: kubevirt.io/v1
    kind: VirtualMachine
    spec:
      template:
        spec:
          domain:
            memory: {guest: 2Gi}
            devices: {}`

// create sends a manifest to the hub as is: unstructured, so the Go types
// never smooth over a bad field before the API server sees it.
func create(t *testing.T, manifest string) error {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("test manifest does not parse: %v\n%s", err, manifest)
	}
	return fleet(t).Hub.Client.Create(t.Context(), obj)
}

// TestSeedVMsAccepted: the three VMs of seed 000 (RHEL9 with cloud-init,
// Windows 10 and Server 2019 with bridged NICs and a data disk) are accepted
// unchanged as templates by the real API server and the webhook, in a
// FleetVirtualMachine of their own namespace ("default": a FleetVM
// delivers only into its namespace).
func TestSeedVMsAccepted(t *testing.T) {
	for _, name := range []string{"rhel9", "windows10", "server2019"} {
		t.Run(name, func(t *testing.T) {
			ns := "default"
			if err := fleet(t).Hub.Tenant(t.Context(), ns); err != nil {
				t.Fatal(err)
			}
			manifest := `
apiVersion: fleetvm.io/v1alpha1
kind: FleetVirtualMachine
metadata:
  name: example-` + name + `
  namespace: ` + ns + `
spec:
  placement:
    environment: prod
  template:
` + seedVM(t, name)
			if err := create(t, manifest); err != nil {
				t.Fatalf("seed VM %s rejected: %v", name, err)
			}
			var got fleetv1alpha1.FleetVirtualMachine
			if err := fleet(t).Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "example-" + name}, &got); err != nil {
				t.Fatal(err)
			}
			// Nothing of the VM was pruned: the stored template is the seed.
			var want, stored map[string]any
			if err := yaml.Unmarshal([]byte(strings.ReplaceAll(seedVM(t, name), "\n    ", "\n")), &want); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(got.Spec.Template.Raw, &stored); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, stored); diff != "" {
				t.Errorf("stored template differs from the seed VM (-want,+got):\n%s", diff)
			}
			if got.Spec.RunStrategy != fleetv1alpha1.RunStrategyAlways || got.Spec.DeletionPolicy != fleetv1alpha1.DeletionPolicyDelete {
				t.Errorf("defaults: runStrategy=%q deletionPolicy=%q, want Always and Delete", got.Spec.RunStrategy, got.Spec.DeletionPolicy)
			}
		})
	}
}

// TestInvalidObjectsRejected: bad FleetVirtualMachines and FleetDiskImages
// are refused by the real API server (OpenAPI, CEL) or the webhook, with a
// message naming the offending field and the reason.
func TestInvalidObjectsRejected(t *testing.T) {
	const ns = "invalid"
	if err := fleet(t).Hub.Tenant(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	fvm := func(name, spec string) string {
		return "apiVersion: fleetvm.io/v1alpha1\nkind: FleetVirtualMachine\nmetadata:\n  name: " + name +
			"\n  namespace: " + ns + "\nspec:\n" + spec
	}
	fdi := func(name, spec string) string {
		return "apiVersion: fleetvm.io/v1alpha1\nkind: FleetDiskImage\nmetadata:\n  name: " + name +
			"\n  namespace: " + ns + "\nspec:\n" + spec
	}
	cases := map[string]struct {
		manifest string
		// want are substrings the error must contain: the field and the reason.
		want []string
	}{
		"template and source both set": {
			manifest: fvm("both", "  placement: {}\n  source: {repoURL: https://git.example/vms.git, path: vms}\n  template:"+minimalVM),
			want:     []string{"spec", "exactly one of template or source"},
		},
		"neither template nor source": {
			manifest: fvm("neither", "  placement: {environment: prod}\n"),
			want:     []string{"spec", "exactly one of template or source"},
		},
		"clusters zero": {
			manifest: fvm("zero", "  placement: {clusters: 0}\n  template:"+minimalVM),
			want:     []string{"spec.placement.clusters", "greater than or equal to 1"},
		},
		"environment not a label value": {
			manifest: fvm("badenv", "  placement: {environment: 'prod env!'}\n  template:"+minimalVM),
			want:     []string{"spec.placement.environment", "should match"},
		},
		"runStrategy not an enum value": {
			manifest: fvm("badrun", "  runStrategy: Sometimes\n  placement: {}\n  template:"+minimalVM),
			want:     []string{"spec.runStrategy", "Unsupported value", "Always"},
		},
		"deletionPolicy not an enum value": {
			manifest: fvm("baddel", "  deletionPolicy: Keep\n  placement: {}\n  template:"+minimalVM),
			want:     []string{"spec.deletionPolicy", "Unsupported value", "Orphan"},
		},
		"template not a VirtualMachine": {
			manifest: fvm("notvm", "  placement: {}\n  template:\n    apiVersion: v1\n    kind: Pod\n    spec: {}\n"),
			want:     []string{"spec.template", "must be a kubevirt.io/v1 VirtualMachine"},
		},
		"template with unknown field": {
			manifest: fvm("typo", "  placement: {}\n  template:"+strings.Replace(minimalVM, "memory: {guest: 2Gi}", "memory: {guest: 2Gi}\n            cpuu: {cores: 2}", 1)),
			want:     []string{"spec.template.spec.template.spec.domain.cpuu", "unknown field"},
		},
		"template with wrong type": {
			manifest: fvm("wrongtype", "  placement: {}\n  template:"+strings.Replace(minimalVM, "memory: {guest: 2Gi}", "memory: {guest: 2Gi}\n            cpu: {cores: four}", 1)),
			want:     []string{"spec.template.spec.template.spec.domain.cpu.cores", "wrong type"},
		},
		"template without memory": {
			manifest: fvm("nomem", "  placement: {}\n  template:"+strings.Replace(minimalVM, "memory: {guest: 2Gi}", "cpu: {cores: 2}", 1)),
			want:     []string{"spec.template.spec.template.spec.domain.memory.guest", "memory"},
		},
		"disk without volume": {
			manifest: fvm("novolume", "  placement: {}\n  template:"+strings.Replace(minimalVM, "devices: {}", "devices: {disks: [{name: rootdisk, disk: {bus: virtio}}]}", 1)),
			want:     []string{"spec.template.spec.template.spec.domain.devices.disks[0].name", "no volume"},
		},
		"name longer than 63": {
			manifest: fvm(strings.Repeat("a", 64), "  placement: {}\n  template:"+minimalVM),
			want:     []string{"metadata.name", "at most 63 characters"},
		},
		"cluster set not a name": {
			manifest: fvm("badset", "  placement: {clusterSets: [Prod_Set]}\n  template:"+minimalVM),
			want:     []string{"spec.placement.clusterSets[0]", "should match"},
		},
		"git path escapes the repository": {
			manifest: fvm("escape", "  placement: {}\n  source: {repoURL: https://git.example/vms.git, path: ../etc}\n"),
			want:     []string{"spec.source.path", "must be relative"},
		},
		"VM name Helm and Kubernetes refuse": {
			manifest: fvm("badvmname", "  placement: {}\n  template:"+strings.Replace(minimalVM, "kind: VirtualMachine", "kind: VirtualMachine\n    metadata: {name: My_VM}", 1)),
			want:     []string{"spec.template.metadata.name", "My_VM", "lowercase RFC 1123"},
		},
		"VM name longer than 63": {
			manifest: fvm("longvmname", "  placement: {}\n  template:"+strings.Replace(minimalVM, "kind: VirtualMachine", "kind: VirtualMachine\n    metadata: {name: "+strings.Repeat("v", 64)+"}", 1)),
			want:     []string{"spec.template.metadata.name", "63"},
		},
		"cluster set not bound to the namespace": {
			manifest: fvm("unbound", "  placement: {clusterSets: [default, restricted]}\n  template:"+minimalVM),
			want:     []string{"spec.placement.clusterSets[1]", `cluster set "restricted" is not bound to namespace invalid`, "ManagedClusterSetBinding"},
		},
		"VM in another namespace": {
			manifest: fvm("elsewhere", "  placement: {}\n  template:"+strings.Replace(minimalVM, "kind: VirtualMachine", "kind: VirtualMachine\n    metadata: {namespace: kube-system}", 1)),
			want:     []string{"spec.template.metadata.namespace", "only into its own namespace (invalid)"},
		},
		"VM namespace not a namespace name": {
			manifest: fvm("badvmns", "  placement: {}\n  template:"+strings.Replace(minimalVM, "kind: VirtualMachine", "kind: VirtualMachine\n    metadata: {namespace: Team.A}", 1)),
			want:     []string{"spec.template.metadata.namespace", "RFC 1123 label"},
		},
		"cluster selector with an unknown operator": {
			manifest: fvm("badop", "  placement:\n    clusterSelector:\n      matchExpressions: [{key: region, operator: Near, values: [east]}]\n  template:"+minimalVM),
			want:     []string{"spec.placement.clusterSelector.matchExpressions[0].operator", "not a valid selector operator"},
		},
		"a rollout's mandatory decision group that is no decision group": {
			manifest: fvm("badgroup", "  placement:\n    decisionStrategy:\n      groupStrategy:\n        decisionGroups: [{groupName: canary, groupClusterSelector: {labelSelector: {matchLabels: {ring: canary}}}}]\n"+
				"  rollout:\n    type: ProgressivePerGroup\n    progressivePerGroup:\n      mandatoryDecisionGroups: [{groupName: canaries}]\n  template:"+minimalVM),
			want: []string{"spec.rollout.progressivePerGroup.mandatoryDecisionGroups[0].groupName", "canaries", "names no group of spec.placement.decisionStrategy.groupStrategy.decisionGroups"},
		},
		"git source with helm, name too long for a Helm release": {
			manifest: fvm(strings.Repeat("h", 54), "  placement: {}\n  source: {repoURL: https://git.example/vms.git, path: vms, helm: {valueFiles: [values.yaml]}}\n"),
			want:     []string{"metadata.name", "at most 53 characters with spec.source.helm", "Helm release name"},
		},
		"disk image with two sources": {
			manifest: fdi("twosources", "  source:\n    http: {url: https://images.example/rhel9.qcow2}\n    registry: {url: docker://quay.example/rhel9:latest}\n  storage: {size: 30Gi}\n"),
			want:     []string{"spec.source", "exactly one of http, registry or s3"},
		},
		"disk image http url not http": {
			manifest: fdi("ftp", "  source:\n    http: {url: ftp://images.example/rhel9.qcow2}\n  storage: {size: 30Gi}\n"),
			want:     []string{"spec.source.http.url", "must start with http:// or https://"},
		},
		"disk image s3 without secret": {
			manifest: fdi("nosecret", "  source:\n    s3: {url: s3://bucket/rhel9.qcow2}\n  storage: {size: 30Gi}\n"),
			want:     []string{"spec.source.s3.secretRef", "Required value"},
		},
		"disk image zero size": {
			manifest: fdi("zerosize", "  source:\n    http: {url: https://images.example/rhel9.qcow2}\n  storage: {size: '0'}\n"),
			want:     []string{"spec.storage.size", "greater than zero"},
		},
		"disk image negative retention": {
			manifest: fdi("negretention", "  source:\n    http: {url: https://images.example/rhel9.qcow2}\n  storage: {size: 30Gi}\n  retention: -1h\n"),
			want:     []string{"spec.retention", "must not be negative"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := create(t, tc.manifest)
			if err == nil {
				t.Fatalf("accepted, want rejected with %q", tc.want)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("error is %v (reason %q), want Invalid", err, apierrors.ReasonForError(err))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestExamplesApplyAsIs: every FleetVirtualMachine in examples/ is accepted
// unchanged by a fresh hub (the API server and the webhook), as a user
// would kubectl apply it.
func TestExamplesApplyAsIs(t *testing.T) {
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(b, &obj.Object); err != nil {
				t.Fatal(err)
			}
			if err := fleet(t).Hub.Tenant(t.Context(), obj.GetNamespace()); err != nil {
				t.Fatal(err)
			}
			if err := fleet(t).Hub.Client.Create(t.Context(), obj, client.DryRunAll); err != nil {
				t.Errorf("%s refused: %v", filepath.Base(file), err)
			}
		})
	}
}

// TestImmutableFields: changes that would strand running VMs are refused.
func TestImmutableFields(t *testing.T) {
	const ns = "immutable"
	if err := fleet(t).Hub.Tenant(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	base := "apiVersion: fleetvm.io/v1alpha1\nkind: FleetVirtualMachine\nmetadata:\n  name: vm\n  namespace: " + ns +
		"\nspec:\n  placement: {}\n  template:" + strings.Replace(minimalVM, "kind: VirtualMachine", "kind: VirtualMachine\n    metadata: {name: web, namespace: immutable}", 1)
	if err := create(t, base); err != nil {
		t.Fatal(err)
	}
	c := fleet(t).Hub.Client
	cases := map[string]struct {
		mutate func(*fleetv1alpha1.FleetVirtualMachine)
		want   []string
	}{
		"rename the VM": {
			mutate: func(f *fleetv1alpha1.FleetVirtualMachine) {
				f.Spec.Template.Raw = []byte(strings.Replace(string(f.Spec.Template.Raw), `"name":"web"`, `"name":"web2"`, 1))
			},
			want: []string{"spec.template", "template.metadata.name is immutable"},
		},
		"move the VM": {
			mutate: func(f *fleetv1alpha1.FleetVirtualMachine) {
				f.Spec.Template.Raw = []byte(strings.Replace(string(f.Spec.Template.Raw), `"namespace":"immutable"`, `"namespace":"apps2"`, 1))
			},
			want: []string{"spec.template.metadata.namespace", "immutable"},
		},
		"swap template for source": {
			mutate: func(f *fleetv1alpha1.FleetVirtualMachine) {
				f.Spec.Template = nil
				f.Spec.Source = &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "vms"}
			},
			want: []string{"spec", "cannot be swapped"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var f fleetv1alpha1.FleetVirtualMachine
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "vm"}, &f); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(f.Spec.Template.Raw), `"name":"web"`) {
				t.Fatalf("test setup: stored template %s", f.Spec.Template.Raw)
			}
			tc.mutate(&f)
			err := c.Update(t.Context(), &f)
			if err == nil {
				t.Fatal("update accepted, want rejected")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestImmutableGitSource: changes to a git source that would rename or
// drop its VMs on every cluster at once are refused, naming the field and
// the reason; a new commit or repository (repoURL, targetRevision) and
// other kustomize options are how a git source rolls out, and pass.
func TestImmutableGitSource(t *testing.T) {
	const ns = "immutable-git"
	if err := fleet(t).Hub.Tenant(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	c := fleet(t).Hub.Client
	create := func(t *testing.T, name string, src fleetv1alpha1.GitSource) *fleetv1alpha1.FleetVirtualMachine {
		t.Helper()
		f := &fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       fleetv1alpha1.FleetVirtualMachineSpec{Source: &src},
		}
		if err := c.Create(t.Context(), f); err != nil {
			t.Fatalf("create: %v", err)
		}
		return f
	}
	kustomize := fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "vms/overlays/{{environment}}", TargetRevision: "main",
		Kustomize: &fleetv1alpha1.KustomizeOptions{NamePrefix: "team-", CommonLabels: map[string]string{"tier": "web"}}}
	plain := fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "vms/base", TargetRevision: "main"}
	helm := fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "charts/vm", TargetRevision: "main",
		Helm: &fleetv1alpha1.HelmOptions{ValueFiles: []string{"values-prod.yaml"}}}
	cases := map[string]struct {
		source fleetv1alpha1.GitSource
		mutate func(*fleetv1alpha1.GitSource)
		// want: parts of the error; nil: the update passes.
		want []string
	}{
		"change the path": {
			source: kustomize,
			mutate: func(s *fleetv1alpha1.GitSource) { s.Path = "vms/other/{{environment}}" },
			want:   []string{"spec.source.path", "path is immutable", "prune"},
		},
		"change the namePrefix": {
			source: kustomize,
			mutate: func(s *fleetv1alpha1.GitSource) { s.Kustomize.NamePrefix = "other-" },
			want:   []string{"spec.source.kustomize.namePrefix", "namePrefix is immutable", "prune"},
		},
		"drop the namePrefix": {
			source: kustomize,
			mutate: func(s *fleetv1alpha1.GitSource) { s.Kustomize = nil },
			want:   []string{"spec.source.kustomize.namePrefix", "namePrefix is immutable"},
		},
		"add a namePrefix": {
			source: plain,
			mutate: func(s *fleetv1alpha1.GitSource) { s.Kustomize = &fleetv1alpha1.KustomizeOptions{NamePrefix: "team-"} },
			want:   []string{"spec.source.kustomize.namePrefix", "namePrefix is immutable"},
		},
		"add helm": {
			source: plain,
			mutate: func(s *fleetv1alpha1.GitSource) { s.Helm = &fleetv1alpha1.HelmOptions{Values: "a: b"} },
			want:   []string{"spec.source.helm", "helm cannot be added or removed"},
		},
		"drop helm": {
			source: helm,
			mutate: func(s *fleetv1alpha1.GitSource) { s.Helm = nil },
			want:   []string{"spec.source.helm", "helm cannot be added or removed"},
		},
		"roll out a new revision": {
			source: kustomize,
			mutate: func(s *fleetv1alpha1.GitSource) { s.TargetRevision = "v2.0.0" },
		},
		"move to a mirror": {
			source: kustomize,
			mutate: func(s *fleetv1alpha1.GitSource) { s.RepoURL = "ssh://git.internal.example/vms.git" },
		},
		"change the common labels": {
			source: kustomize,
			mutate: func(s *fleetv1alpha1.GitSource) { s.Kustomize.CommonLabels = map[string]string{"tier": "db"} },
		},
		"change helm values": {
			source: helm,
			mutate: func(s *fleetv1alpha1.GitSource) { s.Helm.ValueFiles = []string{"values-dev.yaml"} },
		},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			f := create(t, fmt.Sprintf("git-%d", i), tc.source)
			tc.mutate(f.Spec.Source)
			err := c.Update(t.Context(), f)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("update refused, want accepted: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("update accepted, want refused")
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("error is not Invalid: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}
