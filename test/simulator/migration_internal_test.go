package simulator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestNextMigrationPhase: each side of a decentralized migration moves
// only when what KubeVirt waits for is there, and fails as KubeVirt does.
func TestNextMigrationPhase(t *testing.T) {
	peerIn := func(phase kubevirtv1.VirtualMachineInstanceMigrationPhase) *migrationSide {
		return &migrationSide{migrationUID: "peer", phase: phase}
	}
	started := &migrationSide{migrationUID: "peer", phase: kubevirtv1.MigrationRunning, start: &metav1.Time{}}
	withPod := &migrationSide{migrationUID: "peer", phase: kubevirtv1.MigrationScheduling, pod: "virt-launcher-web-abcde"}
	onNode := &migrationSide{migrationUID: "peer", phase: kubevirtv1.MigrationScheduled, pod: "virt-launcher-web-abcde", node: "n1"}
	source := func(phase kubevirtv1.VirtualMachineInstanceMigrationPhase, peer *migrationSide) migrationView {
		return migrationView{phase: phase, vmi: true, running: true, peer: peer}
	}
	target := func(phase kubevirtv1.VirtualMachineInstanceMigrationPhase, peer *migrationSide) migrationView {
		return migrationView{target: true, phase: phase, vmi: true, receiver: true, peer: peer}
	}
	cases := map[string]struct {
		view       migrationView
		want       kubevirtv1.VirtualMachineInstanceMigrationPhase
		wantFailed bool
	}{
		"source starts synchronizing":            {view: source("", nil), want: kubevirtv1.MigrationSynchronizing},
		"source waits for the target":            {view: source(kubevirtv1.MigrationSynchronizing, nil), want: kubevirtv1.MigrationSynchronizing},
		"source synchronized":                    {view: source(kubevirtv1.MigrationSynchronizing, peerIn(kubevirtv1.MigrationWaitingForSync)), want: kubevirtv1.MigrationPending},
		"source schedules its running instance":  {view: source(kubevirtv1.MigrationPending, peerIn(kubevirtv1.MigrationPending)), want: kubevirtv1.MigrationScheduling},
		"source waits for the target pod":        {view: source(kubevirtv1.MigrationScheduling, peerIn(kubevirtv1.MigrationPending)), want: kubevirtv1.MigrationScheduling},
		"source sees the target pod":             {view: source(kubevirtv1.MigrationScheduling, withPod), want: kubevirtv1.MigrationScheduled},
		"source sees the target node":            {view: source(kubevirtv1.MigrationScheduled, onNode), want: kubevirtv1.MigrationPreparingTarget},
		"source waits for a ready target":        {view: source(kubevirtv1.MigrationPreparingTarget, peerIn(kubevirtv1.MigrationPreparingTarget)), want: kubevirtv1.MigrationPreparingTarget},
		"source sees a ready target":             {view: source(kubevirtv1.MigrationPreparingTarget, peerIn(kubevirtv1.MigrationTargetReady)), want: kubevirtv1.MigrationTargetReady},
		"source starts sending":                  {view: source(kubevirtv1.MigrationTargetReady, peerIn(kubevirtv1.MigrationTargetReady)), want: kubevirtv1.MigrationRunning},
		"source waits for the target to receive": {view: source(kubevirtv1.MigrationRunning, peerIn(kubevirtv1.MigrationTargetReady)), want: kubevirtv1.MigrationRunning},
		"source completes":                       {view: source(kubevirtv1.MigrationRunning, started), want: kubevirtv1.MigrationSucceeded},
		"source fails halfway": {
			view: func() migrationView {
				v := source(kubevirtv1.MigrationRunning, started)
				v.failsHalfway = true
				return v
			}(),
			want: kubevirtv1.MigrationFailed, wantFailed: true,
		},
		"source instance stopped during the migration": {
			view: func() migrationView {
				v := source(kubevirtv1.MigrationScheduling, withPod)
				v.running = false
				return v
			}(),
			want: kubevirtv1.MigrationFailed, wantFailed: true,
		},
		"source waits for its instance to run": {
			view: func() migrationView { v := source(kubevirtv1.MigrationPending, nil); v.running = false; return v }(),
			want: kubevirtv1.MigrationPending,
		},
		"source without instance":      {view: migrationView{phase: ""}, want: kubevirtv1.MigrationFailed, wantFailed: true},
		"target fails with the source": {view: target(kubevirtv1.MigrationRunning, peerIn(kubevirtv1.MigrationFailed)), want: kubevirtv1.MigrationFailed, wantFailed: true},
		"target waits for sync":        {view: target("", nil), want: kubevirtv1.MigrationWaitingForSync},
		"target still waiting":         {view: target(kubevirtv1.MigrationWaitingForSync, nil), want: kubevirtv1.MigrationWaitingForSync},
		"target synchronized":          {view: target(kubevirtv1.MigrationWaitingForSync, peerIn(kubevirtv1.MigrationSynchronizing)), want: kubevirtv1.MigrationPending},
		"target without a pod":         {view: target(kubevirtv1.MigrationPending, peerIn(kubevirtv1.MigrationScheduling)), want: kubevirtv1.MigrationPending},
		"target with a pod": {
			view: func() migrationView {
				v := target(kubevirtv1.MigrationPending, peerIn(kubevirtv1.MigrationScheduling))
				v.targetPod = true
				return v
			}(),
			want: kubevirtv1.MigrationScheduling,
		},
		"target ready waits for the source":     {view: target(kubevirtv1.MigrationTargetReady, peerIn(kubevirtv1.MigrationTargetReady)), want: kubevirtv1.MigrationTargetReady},
		"target receives":                       {view: target(kubevirtv1.MigrationTargetReady, started), want: kubevirtv1.MigrationRunning},
		"target waits for the source to finish": {view: target(kubevirtv1.MigrationRunning, started), want: kubevirtv1.MigrationRunning},
		"target completes":                      {view: target(kubevirtv1.MigrationRunning, peerIn(kubevirtv1.MigrationSucceeded)), want: kubevirtv1.MigrationSucceeded},
		"target whose instance completed it": {
			view: func() migrationView {
				v := target(kubevirtv1.MigrationRunning, started)
				v.receiver, v.done = false, true
				return v
			}(),
			want: kubevirtv1.MigrationSucceeded,
		},
		"source whose instance failed it": {
			view: func() migrationView {
				v := source(kubevirtv1.MigrationRunning, started)
				v.failed, v.failure = true, "Live migration failed"
				return v
			}(),
			want: kubevirtv1.MigrationFailed, wantFailed: true,
		},
		"target instance is no receiver": {
			view: func() migrationView { v := target("", nil); v.receiver = false; return v }(),
			want: kubevirtv1.MigrationFailed, wantFailed: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, reason := nextMigrationPhase(tc.view)
			if got != tc.want || (reason != "") != tc.wantFailed {
				t.Errorf("nextMigrationPhase = %s (reason %q), want %s (failure reason: %v)", got, reason, tc.want, tc.wantFailed)
			}
		})
	}
}

// TestMigrationData: the source publishes the non-empty data of the
// claims its instance's volumes name; the target writes it into its
// claims of the same names, once (a second pass writes nothing), and a
// claim it lacks is an error, not one to skip.
func TestMigrationData(t *testing.T) {
	claim := func(name, data string) *corev1.PersistentVolumeClaim {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name}}
		if data != "" {
			pvc.Annotations = map[string]string{DataAnnotation: data}
		}
		return pvc
	}
	instance := func(volumes ...kubevirtv1.Volume) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"},
			Spec:       kubevirtv1.VirtualMachineInstanceSpec{Volumes: volumes},
		}
	}
	dataVolume := func(name string) kubevirtv1.Volume {
		return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: name}}}
	}
	pvcVolume := func(name string) kubevirtv1.Volume {
		return kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: name},
		}}}
	}
	containerDisk := kubevirtv1.Volume{Name: "cloud", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "img"}}}

	s, _, _ := newFakeSimulator(t, claim("root", "root data"), claim("logs", "logs data"), claim("blank", ""))
	got, err := migrationReconciler{s}.sourceData(t.Context(), instance(dataVolume("root"), pvcVolume("logs"), dataVolume("blank"), dataVolume("gone"), containerDisk))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"root": "root data", "logs": "logs data"}, got); diff != "" {
		t.Errorf("source data (-want,+got):\n%s", diff)
	}

	s, c, _ := newFakeSimulator(t, claim("root", ""), claim("logs", "old"), claim("scratch", "own"))
	r := migrationReconciler{s}
	target := instance(dataVolume("root"), pvcVolume("logs"), dataVolume("scratch"), containerDisk)
	data := map[string]string{"root": "root data", "logs": "logs data", "elsewhere": "not the target's"}
	if err := r.receiveData(t.Context(), target, data); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"root": "root data", "logs": "logs data", "scratch": "own"}
	versions := map[string]string{}
	for name, w := range want {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "vms", Name: name}, pvc); err != nil {
			t.Fatal(err)
		}
		if got := pvc.Annotations[DataAnnotation]; got != w {
			t.Errorf("claim %s holds %q, want %q", name, got, w)
		}
		versions[name] = pvc.ResourceVersion
	}
	if err := r.receiveData(t.Context(), target, data); err != nil {
		t.Fatal(err)
	}
	for name, v := range versions {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "vms", Name: name}, pvc); err != nil {
			t.Fatal(err)
		}
		if pvc.ResourceVersion != v {
			t.Errorf("claim %s written again by a second pass (resourceVersion %s, was %s)", name, pvc.ResourceVersion, v)
		}
	}

	err = r.receiveData(t.Context(), instance(dataVolume("root"), dataVolume("gone")), map[string]string{"gone": "data"})
	if !apierrors.IsNotFound(err) {
		t.Errorf("receiving into a claim that does not exist: %v, want a NotFound error to retry", err)
	}
}
