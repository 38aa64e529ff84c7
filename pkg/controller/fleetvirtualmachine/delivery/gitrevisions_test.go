package delivery

import (
	"slices"
	"strings"
	"testing"

	appsettemplate "github.com/argoproj/argo-cd/v3/applicationset/controllers/template"
	"github.com/argoproj/argo-cd/v3/applicationset/generators"
	"github.com/argoproj/argo-cd/v3/applicationset/utils"
	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	log "github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// generateSources runs Argo CD's own ApplicationSet rendering (the list
// generator, the Go template, the templatePatch) and returns each
// cluster's Application source.
func generateSources(t *testing.T, hubs *argoapp.ApplicationSet) map[string]*argov1alpha1.ApplicationSource {
	t.Helper()
	appSet := asArgo[argov1alpha1.ApplicationSet](t, hubs)
	gens := map[string]generators.Generator{"List": generators.NewListGenerator()}
	apps, _, err := appsettemplate.GenerateApplications(log.NewEntry(log.StandardLogger()), *appSet, gens, &utils.Render{}, nil)
	if err != nil {
		t.Fatalf("Argo CD cannot render the ApplicationSet: %v\ntemplatePatch:\n%s", err, ptrString(appSet.Spec.TemplatePatch))
	}
	out := map[string]*argov1alpha1.ApplicationSource{}
	for _, app := range apps {
		out[app.Spec.Destination.Name] = app.Spec.Source
	}
	return out
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestApplicationSetGitRevisions: a git source under spec.rollout. Its
// revisions differ by targetRevision and by the options Argo CD renders
// them with. Argo CD, rendering the ApplicationSet, gives each cluster's
// Application the source of the revision that cluster is given, whole:
// nothing of the latest revision leaks into an older one (a label the
// older has not, a value file, Helm values), the user's "{{" stays text,
// and each VM is labelled with its cluster's revision. With every
// cluster on the latest there is no templatePatch.
func TestApplicationSetGitRevisions(t *testing.T) {
	r := Renderer{ArgoNamespace: "argocd"}
	const clusterLabel = "fleetvm.io/cluster"
	cases := map[string]struct {
		older, latest *fleetv1alpha1.GitSource
	}{
		"kustomize": {
			older: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "vm/{{environment}}", TargetRevision: "v1",
				Kustomize: &fleetv1alpha1.KustomizeOptions{CommonLabels: map[string]string{"team": "{{db}}", "old": "yes"}}},
			latest: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "vm/{{environment}}", TargetRevision: "v2",
				Kustomize: &fleetv1alpha1.KustomizeOptions{CommonLabels: map[string]string{"team": "db", "tier": "new"}}},
		},
		"helm": {
			older: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "chart", TargetRevision: "v1",
				Helm: &fleetv1alpha1.HelmOptions{ValueFiles: []string{"values.yaml", "old.yaml"}, Values: "memory: 1Gi\nnote: \"{{ not a template }}\"\n"}},
			latest: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "chart", TargetRevision: "v2",
				Helm: &fleetv1alpha1.HelmOptions{ValueFiles: []string{"values.yaml"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fvm := &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "vms", UID: "u1"},
				Spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways, Source: tc.latest,
					Rollout: &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}},
				Status: fleetv1alpha1.FleetVirtualMachineStatus{Rollout: &fleetv1alpha1.RolloutStatus{Revision: 2, Hash: "h"}},
			}
			latest, older := RevisionOf(fvm, 2), &Revision{Number: 1, Source: tc.older}
			appSet, err := r.ApplicationSet(fvm, "p", []Target{
				{Name: "a", Environment: "prod", Revision: latest},
				{Name: "b", Environment: "prod", Revision: older},
				{Name: "c", Environment: "prod", Revision: older},
			})
			if err != nil {
				t.Fatal(err)
			}
			if appSet.Spec.TemplatePatch == nil {
				t.Fatal("no templatePatch while clusters b and c are given revision 1")
			}
			got := generateSources(t, appSet)

			// What Argo CD gives each cluster with spec.rollout set and
			// every cluster on that revision (no patch at all).
			alone := func(src *fleetv1alpha1.GitSource, cluster string) *argov1alpha1.ApplicationSource {
				one := fvm.DeepCopy()
				one.Spec.Source = src
				rev := RevisionOf(one, 9)
				one.Status.Rollout.Revision = 9
				a, err := r.ApplicationSet(one, "p", []Target{{Name: cluster, Environment: "prod", Revision: rev}})
				if err != nil {
					t.Fatal(err)
				}
				if a.Spec.TemplatePatch != nil {
					t.Fatalf("a templatePatch with every cluster on the latest revision:\n%s", *a.Spec.TemplatePatch)
				}
				s := generateSources(t, a)[cluster]
				// The element's revision (9 here) is each cluster's own.
				relabel(s, "9", "")
				return s
			}
			for cluster, src := range map[string]*fleetv1alpha1.GitSource{"a": tc.latest, "b": tc.older, "c": tc.older} {
				want := alone(src, cluster)
				have := got[cluster].DeepCopy()
				revision := map[string]string{"a": "2", "b": "1", "c": "1"}[cluster]
				if !relabel(have, revision, "") {
					t.Errorf("%s: the VM is not labelled with revision %s: %+v", cluster, revision, got[cluster])
				}
				if diff := cmp.Diff(want, have, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: source (-revision %s alone +as rendered beside the others):\n%s", cluster, revision, diff)
				}
			}
			if tc.latest.Kustomize != nil {
				labels := got["b"].Kustomize.CommonLabels
				if _, ok := labels["tier"]; ok || labels["team"] != "{{db}}" || labels["old"] != "yes" || labels[clusterLabel] != "b" {
					t.Errorf("b's labels %v: want revision 1's (team {{db}}, old yes) and the cluster's, nothing of revision 2", labels)
				}
			} else {
				h := got["b"].Helm
				if !slices.Equal(h.ValueFiles, tc.older.Helm.ValueFiles) || h.Values != tc.older.Helm.Values || got["b"].TargetRevision != "v1" {
					t.Errorf("b's Helm source %+v at %s: want revision 1's", h, got["b"].TargetRevision)
				}
			}
		})
	}
}

// relabel finds the revision label (kustomize patch) or parameter (Helm)
// of src with value from and sets it to to; false when there is none.
func relabel(src *argov1alpha1.ApplicationSource, from, to string) bool {
	found := false
	if k := src.Kustomize; k != nil {
		for i, p := range k.Patches {
			line := fleetv1alpha1.LabelRevision + `: "` + from + `"`
			if strings.Contains(p.Patch, line) {
				k.Patches[i].Patch = strings.Replace(p.Patch, line, fleetv1alpha1.LabelRevision+`: "`+to+`"`, 1)
				found = true
			}
		}
	}
	if h := src.Helm; h != nil {
		for i, p := range h.Parameters {
			if p.Name == "fleetvm.revision" && p.Value == from {
				h.Parameters[i].Value = to
				found = true
			}
		}
	}
	return found
}
