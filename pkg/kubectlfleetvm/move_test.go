package kubectlfleetvm

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/google/go-cmp/cmp"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

func TestMoveGenerateName(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"short":                     {"web", "web-"},
		"57 characters, kept whole": {strings.Repeat("a", 57), strings.Repeat("a", 57) + "-"},
		"cut to 57":                 {strings.Repeat("a", 70), strings.Repeat("a", 57) + "-"},
		"cut before a dot and dash": {strings.Repeat("a", 55) + ".-b" + strings.Repeat("c", 10), strings.Repeat("a", 55) + "-"},
	} {
		t.Run(name, func(t *testing.T) {
			got := moveGenerateName(tc.in)
			if got != tc.want {
				t.Errorf("moveGenerateName(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if len(got)+5 > 63 {
				t.Errorf("%q and five random characters are %d long, more than a DNS label", got, len(got)+5)
			}
		})
	}
}

func TestMoveFollower(t *testing.T) {
	type seen struct {
		phase   fleetv1alpha1.MovePhase
		message string
	}
	type printed struct {
		Line  string
		Ended bool
	}
	states := []seen{
		{"", ""},
		{"", ""},
		{fleetv1alpha1.MovePending, "waiting for move web-1 of the same VM"},
		{fleetv1alpha1.MovePreparing, "creating the VM stopped on prod-c"},
		{fleetv1alpha1.MovePreparing, "creating the VM stopped on prod-c"},
		{fleetv1alpha1.MovePreparing, "disks provisioned\x1b[0m on prod-c"},
		{fleetv1alpha1.MoveSwitching, ""},
		{fleetv1alpha1.MoveRollingBack, "not ready on prod-c within 15m0s"},
		{fleetv1alpha1.MoveFailed, "not ready on prod-c within 15m0s"},
	}
	want := []printed{
		{Line: "waiting for the hub to start the move"},
		{},
		{Line: "Pending: waiting for move web-1 of the same VM"},
		{Line: "Preparing: creating the VM stopped on prod-c"},
		{},
		{Line: "Preparing: disks provisioned[0m on prod-c"},
		{Line: "Switching"},
		{Line: "RollingBack: not ready on prod-c within 15m0s"},
		{Line: "Failed: not ready on prod-c within 15m0s", Ended: true},
	}
	f := &moveFollower{}
	var got []printed
	for _, s := range states {
		m := &fleetv1alpha1.FleetVirtualMachineMove{Status: fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: s.phase, Message: s.message}}
		line, ended := f.observe(m)
		got = append(got, printed{line, ended})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("printed (-want,+got):\n%s", diff)
	}
}

// TestCheckMove: a move the hub would refuse is refused before anything
// is written, with the flag at fault named.
func TestCheckMove(t *testing.T) {
	fvm := utiltesting.MakeFleetVM("vms", "web").Obj()
	fvm.Status.Clusters = []fleetv1alpha1.ClusterStatus{
		{Cluster: "prod-a", Phase: fleetv1alpha1.ClusterPhaseRunning},
		{Cluster: "prod-b", Phase: fleetv1alpha1.ClusterPhaseLeaving, LeavingSince: ago(0)},
	}
	fromGit := fvm.DeepCopy()
	fromGit.Spec.Template = nil
	nowhere := utiltesting.MakeFleetVM("vms", "new").Obj()
	ownData := fvm.DeepCopy()
	ownData.Spec.Template = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{
		"dataVolumeTemplates":[{"metadata":{"name":"web-data"},"spec":{"source":{"blank":{}}}}],
		"template":{"spec":{"domain":{},"volumes":[{"name":"data","dataVolume":{"name":"web-data"}}]}}}}`)}
	for name, tc := range map[string]struct {
		fvm  *fleetv1alpha1.FleetVirtualMachine
		mo   moveOptions
		want string
	}{
		"a copy there, Auto":                     {fvm: fvm, mo: moveOptions{from: "prod-a", method: "Auto"}},
		"a copy there, to a cluster without one": {fvm: fvm, mo: moveOptions{from: "prod-a", to: "prod-c", method: "Restart"}},
		"no copy on --from": {fvm: fvm, mo: moveOptions{from: "prod-x", method: "Auto"},
			want: "--from prod-x: FleetVirtualMachine vms/web has no copy there (its copies: prod-a; leaving: prod-b)"},
		"the copy on --from is leaving already": {fvm: fvm, mo: moveOptions{from: "prod-b", method: "Auto"},
			want: "--from prod-b: FleetVirtualMachine vms/web has no copy there (its copies: prod-a; leaving: prod-b)"},
		"no copy anywhere": {fvm: nowhere, mo: moveOptions{from: "prod-a", method: "Auto"},
			want: "--from prod-a: FleetVirtualMachine vms/new has no copy there (it has no copy on any cluster yet)"},
		"--to holds a copy, even one leaving": {fvm: fvm, mo: moveOptions{from: "prod-a", to: "prod-b", method: "Auto"},
			want: "--to prod-b: FleetVirtualMachine vms/web already has a copy there: a move goes to a cluster without one"},
		"a VM from git must name its method": {fvm: fromGit, mo: moveOptions{from: "prod-a", method: "Auto"},
			want: "--method Auto: vms/web cannot move: spec.method must be Restart for a VM from git: the hub cannot read its disks to choose"},
		"a VM from git with Restart": {fvm: fromGit, mo: moveOptions{from: "prod-a", method: "Restart"}},
		"data of its own, Auto":      {fvm: ownData, mo: moveOptions{from: "prod-a", method: "Auto"}},
		"data of its own, Restart would lose it": {fvm: ownData, mo: moveOptions{from: "prod-a", method: "Restart"},
			want: "--method Restart: vms/web cannot move: spec.method Restart does not fit the VM: it moves by Cold"},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkMove(tc.fvm, &tc.mo)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("checkMove = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMoveFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		mo         moveOptions
		want       string
		wantMethod string
	}{
		"defaults":          {mo: moveOptions{from: "a", method: "Auto", timeout: 1}, wantMethod: "Auto"},
		"method any case":   {mo: moveOptions{from: "a", method: "restart", timeout: 1}, wantMethod: "Restart"},
		"no --from":         {mo: moveOptions{method: "Auto", timeout: 1}, want: "--from is required: the managed cluster the copy leaves"},
		"--to is --from":    {mo: moveOptions{from: "a", to: "a", method: "Auto", timeout: 1}, want: `--to must differ from --from (both are "a")`},
		"unknown method":    {mo: moveOptions{from: "a", method: "Teleport", timeout: 1}, want: `--method must be Auto, Restart, Cold or Live, not "Teleport"`},
		"timeout not above": {mo: moveOptions{from: "a", method: "Auto"}, want: "--timeout must be positive, not 0s"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.mo.validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("validate = %q, want %q", got, tc.want)
			}
			if tc.wantMethod != "" && tc.mo.method != tc.wantMethod {
				t.Errorf("method = %q, want %q", tc.mo.method, tc.wantMethod)
			}
		})
	}
}
