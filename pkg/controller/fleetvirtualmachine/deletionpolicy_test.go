package fleetvirtualmachine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

func TestDeletionPolicyInEffect(t *testing.T) {
	type want struct {
		Policy fleetv1alpha1.DeletionPolicy
		Record bool
		Note   string
	}
	const (
		del    = fleetv1alpha1.DeletionPolicyDelete
		orphan = fleetv1alpha1.DeletionPolicyOrphan
	)
	cases := map[string]struct {
		spec, recorded fleetv1alpha1.DeletionPolicy
		want           want
	}{
		"deletion starts with Delete: recorded": {
			spec: del,
			want: want{Policy: del, Record: true, Note: "deletionPolicy Delete, as when the deletion started"},
		},
		"deletion starts with the default (unset is Delete)": {
			want: want{Policy: del, Record: true, Note: "deletionPolicy Delete, as when the deletion started"},
		},
		"deletion starts with Orphan: recorded": {
			spec: orphan,
			want: want{Policy: orphan, Record: true, Note: "deletionPolicy Orphan, as when the deletion started"},
		},
		"Orphan set after a Delete deletion started is not followed": {
			spec: orphan, recorded: del,
			want: want{Policy: del, Note: "deletionPolicy Delete, as when the deletion started; spec.deletionPolicy Orphan, set after, is not followed"},
		},
		"Delete set after an Orphan deletion started is not followed": {
			spec: del, recorded: orphan,
			want: want{Policy: orphan, Note: "deletionPolicy Orphan, as when the deletion started; spec.deletionPolicy Delete, set after, is not followed"},
		},
		"recorded and unchanged": {
			spec: orphan, recorded: orphan,
			want: want{Policy: orphan, Note: "deletionPolicy Orphan, as when the deletion started"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			now := metav1.Now()
			fvm := &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", DeletionTimestamp: &now},
				Spec:       fleetv1alpha1.FleetVirtualMachineSpec{DeletionPolicy: tc.spec},
				Status:     fleetv1alpha1.FleetVirtualMachineStatus{DeletionPolicy: tc.recorded},
			}
			var got want
			got.Policy, got.Record = deletionPolicyInEffect(fvm)
			got.Note = deletionPolicyNote(fvm)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
