package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
)

const (
	hubSA  = "system:serviceaccount:fleetvm-system:fleetvm-hub"
	tenant = "system:serviceaccount:team:deployer"
)

func moveWith(labels, annotations map[string]string) *fleetv1alpha1.FleetVirtualMachineMove {
	return &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team", Labels: labels, Annotations: annotations},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "vm", From: "prod-a"},
	}
}

func TestMoveValidatorKeepsDrainMarksToTheHub(t *testing.T) {
	drainLabel := map[string]string{fleetv1alpha1.LabelDrain: "prod-a"}
	uid := map[string]string{drain.AnnotationCluster: "6f1c2a8e"}
	const (
		labelPath      = "metadata.labels[fleetvm.io/drain]"
		annotationPath = "metadata.annotations[fleetvm.io/drain-cluster]"
	)
	cases := map[string]struct {
		user string
		old  *fleetv1alpha1.FleetVirtualMachineMove // nil: a create
		move *fleetv1alpha1.FleetVirtualMachineMove
		// refused lists the fields the error must name; none: allowed.
		refused []string
	}{
		"a team creates a move": {
			user: tenant, move: moveWith(map[string]string{"app": "x"}, nil),
		},
		"a team creates a move with the drain label": {
			user: tenant, move: moveWith(drainLabel, nil), refused: []string{labelPath},
		},
		"a team creates a move with both drain marks": {
			user: tenant, move: moveWith(drainLabel, uid), refused: []string{labelPath, annotationPath},
		},
		"a team creates a move with an empty drain label": {
			user: tenant, move: moveWith(map[string]string{fleetv1alpha1.LabelDrain: ""}, nil), refused: []string{labelPath},
		},
		"the hub creates a drain's move": {
			user: hubSA, move: moveWith(drainLabel, uid),
		},
		"a team adds the drain label": {
			user: tenant, old: moveWith(nil, nil), move: moveWith(drainLabel, nil), refused: []string{labelPath},
		},
		"a team changes the drain label": {
			user: tenant, old: moveWith(drainLabel, uid), move: moveWith(map[string]string{fleetv1alpha1.LabelDrain: "prod-b"}, uid), refused: []string{labelPath},
		},
		"a team removes the drain label": {
			user: tenant, old: moveWith(drainLabel, uid), move: moveWith(nil, uid), refused: []string{labelPath},
		},
		"a team adds the cluster's UID": {
			user: tenant, old: moveWith(drainLabel, nil), move: moveWith(drainLabel, uid), refused: []string{annotationPath},
		},
		"a team updates a drain's move, marks untouched": {
			user: tenant, old: moveWith(drainLabel, uid), move: func() *fleetv1alpha1.FleetVirtualMachineMove {
				m := moveWith(map[string]string{fleetv1alpha1.LabelDrain: "prod-a", "team": "ops"}, uid)
				m.Finalizers = []string{fleetv1alpha1.MoveFinalizer}
				return m
			}(),
		},
		"the hub changes the drain label": {
			user: hubSA, old: moveWith(drainLabel, uid), move: moveWith(nil, nil),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := &MoveValidator{HubUser: func(context.Context) (string, error) { return hubSA, nil }}
			ctx := admission.NewContextWithRequest(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				UserInfo: authenticationv1.UserInfo{Username: tc.user},
			}})
			var err error
			if tc.old == nil {
				_, err = v.ValidateCreate(ctx, tc.move)
			} else {
				_, err = v.ValidateUpdate(ctx, tc.old, tc.move)
			}
			if len(tc.refused) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want the request refused as invalid", err)
			}
			status := err.(apierrors.APIStatus).Status()
			var fields []string
			for _, c := range status.Details.Causes {
				fields = append(fields, c.Field)
			}
			if strings.Join(fields, ",") != strings.Join(tc.refused, ",") {
				t.Errorf("refused fields %v, want %v", fields, tc.refused)
			}
			// The reason and who may set it, for the user who reads it.
			for _, want := range []string{"only fleetvm-hub's drain controller", tc.user, fleetv1alpha1.DrainTaintKey} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestMoveValidatorFailsClosed: when the hub's user cannot be told, a
// drain's marks are refused to everyone, and other moves still pass.
func TestMoveValidatorFailsClosed(t *testing.T) {
	v := &MoveValidator{HubUser: func(context.Context) (string, error) { return "", errors.New("API server unreachable") }}
	ctx := admission.NewContextWithRequest(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UserInfo: authenticationv1.UserInfo{Username: hubSA},
	}})
	if _, err := v.ValidateCreate(ctx, moveWith(map[string]string{fleetv1alpha1.LabelDrain: "prod-a"}, nil)); err == nil {
		t.Error("a drain's move was admitted with the hub's user unknown")
	}
	if _, err := v.ValidateCreate(ctx, moveWith(nil, nil)); err != nil {
		t.Errorf("a move without drain marks was refused: %v", err)
	}
	if errs := drainMarkErrors("", "", nil); len(errs) != 0 {
		t.Errorf("nothing changed, refused: %v", errs)
	}
}
