package foundation

import (
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// TestDrainMarksOnlyFromTheHub: on the real API server, a team that may
// write moves in its namespace cannot create one carrying a drain's
// marks, nor add, change or remove them, and is told which field and why;
// the hub's own user can; and with fleetvm-hub's webhooks unreachable a
// team's ordinary moves still go through (matchConditions) while a
// drain's marks are still refused (failurePolicy Fail).
func TestDrainMarksOnlyFromTheHub(t *testing.T) {
	ctx := t.Context()
	f := fleet(t)
	const ns = "drain-marks"
	if err := f.Hub.Tenant(ctx, ns); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":deployer"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moves"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{fleetv1alpha1.GroupVersion.Group}, Resources: []string{"fleetvirtualmachinemoves"}, Verbs: []string{"*"},
	}}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "moves"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := f.Hub.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg, err := f.Hub.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	team, err := client.New(cfg, client.Options{Scheme: f.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	hub := f.Hub.Client // the user the test hub, and so its webhook, acts as

	move := func(name string, labels, annotations map[string]string) *fleetv1alpha1.FleetVirtualMachineMove {
		return &fleetv1alpha1.FleetVirtualMachineMove{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
			Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: "prod-east"},
		}
	}
	label := map[string]string{fleetv1alpha1.LabelDrain: "prod-east"}
	annotation := map[string]string{drain.AnnotationCluster: "uid-of-prod-east"}
	refused := func(t *testing.T, err error, field string) {
		t.Helper()
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "only fleetvm-hub's drain controller") {
			t.Errorf("got %v, want refused naming %s and why", err, field)
		}
	}
	const labelField, annotationField = "metadata.labels[fleetvm.io/drain]", "metadata.annotations[fleetvm.io/drain-cluster]"

	refused(t, team.Create(ctx, move("forged-label", label, nil)), labelField)
	refused(t, team.Create(ctx, move("forged-uid", nil, annotation)), annotationField)
	if err := team.Create(ctx, move("own", map[string]string{"app": "web"}, nil)); err != nil {
		t.Fatalf("a team's own move without drain marks: %v", err)
	}
	own := &fleetv1alpha1.FleetVirtualMachineMove{}
	if err := team.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own"}, own); err != nil {
		t.Fatal(err)
	}
	own.Labels[fleetv1alpha1.LabelDrain] = "prod-east"
	refused(t, team.Update(ctx, own), labelField)

	drained := move("drain-prod-east-web", label, annotation)
	if err := hub.Create(ctx, drained); err != nil {
		t.Fatalf("the hub's own drain move: %v", err)
	}
	// A team may still label a drain's move otherwise, not touch its marks.
	if err := team.Get(ctx, client.ObjectKeyFromObject(drained), drained); err != nil {
		t.Fatal(err)
	}
	drained.Labels["team"] = "ops"
	if err := team.Update(ctx, drained); err != nil {
		t.Errorf("a team's label beside the drain's marks: %v", err)
	}
	if err := team.Get(ctx, client.ObjectKeyFromObject(drained), drained); err != nil {
		t.Fatal(err)
	}
	delete(drained.Labels, fleetv1alpha1.LabelDrain)
	refused(t, team.Update(ctx, drained), labelField)

	restore, err := f.WebhooksDown(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := restore(ctx); err != nil {
			t.Error(err)
		}
	}()
	// Down once the API server fails to call the webhook for a drain's
	// marks (it takes the change up a moment later): refused still.
	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		err := team.Create(ctx, move("forged-while-down", label, nil))
		switch {
		case err == nil:
			return false, errors.New("fleetvm-hub down, a team's move with the drain label was admitted")
		case strings.Contains(err.Error(), "failed calling webhook"):
			return true, nil
		}
		return false, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := team.Create(ctx, move("while-down", nil, nil)); err != nil {
		t.Errorf("fleetvm-hub down, a team's move without drain marks: %v", err)
	}
	if err := team.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own"}, own); err != nil {
		t.Fatal(err)
	}
	own.Finalizers = append(own.Finalizers, "example.com/keep")
	if err := team.Update(ctx, own); err != nil {
		t.Errorf("fleetvm-hub down, an update leaving labels and annotations alone: %v", err)
	}
	own.Finalizers = nil
	if err := team.Update(ctx, own); err != nil {
		t.Errorf("fleetvm-hub down, removing a finalizer: %v", err)
	}
}
