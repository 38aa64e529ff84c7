package kubectlfleetvm

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestRollout: the rollout verbs on a FleetVM whose revisions the hub
// recorded (ControllerRevisions, status.rollout). status names the
// clusters that have not succeeded; pause, resume and abort set and
// remove the annotations the hub reads; undo puts an earlier revision's
// template and disk images back whole (the fields the revision lacks
// go), and only on the object as read; history lists the revisions.
func TestRollout(t *testing.T) {
	ns := namespace(t, "rollout")
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	strategy := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
		Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt32(1)}}
	v1 := utiltesting.MakeFleetVM(ns, "web").VM(1, "1Gi").DiskImages("rhel9").Obj()
	fvm := utiltesting.MakeFleetVM(ns, "web").VM(2, "2Gi").VMMetadata(map[string]any{"labels": map[string]any{"tier": "new"}}).
		Clusters(3).Rollout(strategy).Obj()
	create(t, fvm)
	fvm = get(t, ns, "web")
	for n, spec := range map[int64]fleetv1alpha1.FleetVirtualMachineSpec{1: v1.Spec, 2: fvm.Spec} {
		data, err := json.Marshal(map[string]any{"template": spec.Template, "diskImages": spec.DiskImages})
		if err != nil {
			t.Fatal(err)
		}
		cr := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + string(rune('0'+n)),
				Labels: map[string]string{fleetv1alpha1.LabelFleetVMName: "web", fleetv1alpha1.LabelFleetVMNamespace: ns}},
			Data: runtime.RawExtension{Raw: data}, Revision: n,
		}
		if err := controllerutil.SetControllerReference(fvm, cr, fleet.Hub.Client.Scheme()); err != nil {
			t.Fatal(err)
		}
		create(t, cr)
	}
	since := metav1.NewTime(now.Add(-3 * time.Minute))
	if err := setStatus(t.Context(), ns, "web", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = clusters(fleetv1alpha1.ClusterPhaseRunning, "prod-a", "prod-b", "prod-c")
		f.Status.Clusters[1].Rollout = &fleetv1alpha1.ClusterRollout{Revision: 2, State: "Applying", Since: &since}
		f.Status.Clusters[2].Rollout = &fleetv1alpha1.ClusterRollout{Revision: 1, State: "ToApply"}
		f.Status.Rollout = &fleetv1alpha1.RolloutStatus{Revision: 2, PreviousRevision: 1, Hash: "h", Phase: "Progressing", Updated: 1,
			Message: "1 cluster in flight of maxConcurrency 1"}
	}); err != nil {
		t.Fatal(err)
	}

	res := kubectl(t, now, "-n", ns, "rollout", "status", "web")
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := `revision 2 (previous 1): Progressing, 1 of 3 clusters updated, 0 failed
1 cluster in flight of maxConcurrency 1
CLUSTER  REVISION  STATE     SINCE  READY SINCE  WHY
prod-b   2         Applying  3m     -            its VM does not run the revision yet
prod-c   1         ToApply   -      -            waits for a place: 1 of maxConcurrency 1 in flight
`
	if diff := cmp.Diff(want, lines(res.out)); diff != "" {
		t.Errorf("rollout status (-want +got):\n%s", diff)
	}

	for _, step := range []struct {
		verb, annotation, want string
	}{
		{"pause", fleetv1alpha1.AnnotationRolloutPaused, "true"},
		{"resume", fleetv1alpha1.AnnotationRolloutPaused, ""},
		{"abort", fleetv1alpha1.AnnotationRolloutAbort, "2"},
	} {
		if res := kubectl(t, now, "-n", ns, "rollout", step.verb, "web"); res.err != nil {
			t.Fatalf("rollout %s: %v", step.verb, res.err)
		}
		if got := get(t, ns, "web").Annotations[step.annotation]; got != step.want {
			t.Errorf("after rollout %s: annotation %s is %q, want %q", step.verb, step.annotation, got, step.want)
		}
	}

	res = kubectl(t, now, "-n", ns, "rollout", "history", "web")
	if res.err != nil || !strings.Contains(res.out, "2 (latest)") || !strings.Contains(res.out, "web-1") {
		t.Errorf("rollout history: %v\n%s", res.err, res.out)
	}

	if res := kubectl(t, now, "-n", ns, "rollout", "undo", "web", "--to-revision", "7"); res.err == nil || !strings.Contains(res.err.Error(), "revision 7") {
		t.Errorf("undo to a revision not kept: %v, want an error naming it", res.err)
	}
	before := get(t, ns, "web")
	if res := kubectl(t, now, "-n", ns, "rollout", "undo", "web"); res.err != nil {
		t.Fatal(res.err)
	}
	after := get(t, ns, "web")
	if diff := cmp.Diff(string(v1.Spec.Template.Raw), string(after.Spec.Template.Raw), cmp.Transformer("json", func(s string) any {
		var v any
		_ = json.Unmarshal([]byte(s), &v)
		return v
	})); diff != "" {
		t.Errorf("undo: template is not revision 1's, whole (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(v1.Spec.DiskImages, after.Spec.DiskImages); diff != "" {
		t.Errorf("undo: disk images (-want +got):\n%s", diff)
	}
	if after.Spec.Placement.Clusters == nil || *after.Spec.Placement.Clusters != 3 || after.Spec.Rollout == nil {
		t.Errorf("undo changed more than the template and disk images: %+v", after.Spec)
	}
	if after.Generation != before.Generation+1 {
		t.Errorf("undo: generation %d, want one write (%d)", after.Generation, before.Generation+1)
	}
}

// TestRolloutUndoGitSource: a git source's revisions are its targetRevision
// and options. history names each revision's targetRevision; undo puts
// an earlier revision's source back whole (a label only the later one
// has goes), in one write.
func TestRolloutUndoGitSource(t *testing.T) {
	ns := namespace(t, "rollout-git")
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	source := func(tag string, labels map[string]string) *fleetv1alpha1.GitSource {
		return &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "db", TargetRevision: tag,
			Kustomize: &fleetv1alpha1.KustomizeOptions{CommonLabels: labels}}
	}
	v1 := source("v1", map[string]string{"old": "yes"})
	fvm := utiltesting.MakeFleetVM(ns, "db").Clusters(2).Rollout(clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}).Obj()
	fvm.Spec.Template, fvm.Spec.Source = nil, source("v2", map[string]string{"tier": "new"})
	create(t, fvm)
	fvm = get(t, ns, "db")
	for n, src := range map[int64]*fleetv1alpha1.GitSource{1: v1, 2: fvm.Spec.Source} {
		data, err := json.Marshal(map[string]any{"template": nil, "source": src})
		if err != nil {
			t.Fatal(err)
		}
		cr := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-" + string(rune('0'+n)),
				Labels: map[string]string{fleetv1alpha1.LabelFleetVMName: "db", fleetv1alpha1.LabelFleetVMNamespace: ns}},
			Data: runtime.RawExtension{Raw: data}, Revision: n,
		}
		if err := controllerutil.SetControllerReference(fvm, cr, fleet.Hub.Client.Scheme()); err != nil {
			t.Fatal(err)
		}
		create(t, cr)
	}
	if err := setStatus(t.Context(), ns, "db", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = clusters(fleetv1alpha1.ClusterPhaseRunning, "prod-a", "prod-b")
		f.Status.Rollout = &fleetv1alpha1.RolloutStatus{Revision: 2, PreviousRevision: 1, Hash: "h", Phase: "Succeeded", Updated: 2}
	}); err != nil {
		t.Fatal(err)
	}

	res := kubectl(t, now, "-n", ns, "rollout", "history", "db")
	if res.err != nil {
		t.Fatal(res.err)
	}
	for _, want := range []string{"REVISION  TARGETREVISION  CONTROLLERREVISION", "1         v1              db-1", "2 (latest)  v2"} {
		if !strings.Contains(strings.Join(strings.Fields(lines(res.out)), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("rollout history does not say %q:\n%s", want, res.out)
		}
	}

	before := get(t, ns, "db")
	res = kubectl(t, now, "-n", ns, "rollout", "undo", "db")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if !strings.Contains(res.out, "rolled back to the git source of revision 1") {
		t.Errorf("undo said %q", res.out)
	}
	after := get(t, ns, "db")
	if diff := cmp.Diff(v1, after.Spec.Source); diff != "" {
		t.Errorf("undo: source is not revision 1's, whole (-want +got):\n%s", diff)
	}
	if after.Spec.Template != nil || after.Spec.Rollout == nil || after.Generation != before.Generation+1 {
		t.Errorf("undo: template %v, rollout %v, generation %d (want one write after %d)", after.Spec.Template, after.Spec.Rollout, after.Generation, before.Generation)
	}
}
