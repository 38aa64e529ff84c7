package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// RolloutSpec changes the memory of a VM on two clusters under a
// Progressive rollout, one cluster at a time with a short soak, through
// real Argo CD: each cluster's VM is restarted on the new spec in its
// turn (KubeVirt's RestartRequired), never both down at once as the
// spokes show, and the rollout succeeds with both on revision 2.
func RolloutSpec(t *testing.T, in LifecycleInput) {
	in.Clusters = 2
	const soak = 3 * time.Second
	fvm := newTestFVM(in, "rolled", fleetv1alpha1.DeletionPolicyDelete)
	fvm.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
		MaxConcurrency: intstr.FromInt32(1),
		RolloutConfig:  clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: soak}},
	}}
	decided := applyAndWaitRunning(t, in, fvm)
	waitFVM(t, in, fvm, "revision 1 succeeded", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if r := f.Status.Rollout; r == nil || r.Revision != 1 || r.Phase != "Succeeded" {
			return fmt.Errorf("rollout %+v", r)
		}
		return nil
	})

	// Watch the spokes while the change rolls out: when each copy is
	// first seen on revision 2 and ready, and how many are down at once.
	ctx, cancel := context.WithCancel(t.Context())
	var (
		mu       sync.Mutex
		mostDown int
		wentDown = map[string]bool{}
		arrived  = map[string]time.Duration{}
	)
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			down := 0
			for _, c := range decided {
				vm := &kubevirtv1.VirtualMachine{}
				if err := in.Spokes[c].Get(ctx, vmKey(fvm), vm); err != nil {
					continue
				}
				mu.Lock()
				if !vm.Status.Ready {
					down++
					wentDown[c] = true
				} else if _, ok := arrived[c]; !ok && wentDown[c] && vm.Labels[fleetv1alpha1.LabelRevision] == "2" {
					arrived[c] = time.Since(start) // ready again after its restart
				}
				mu.Unlock()
			}
			mu.Lock()
			mostDown = max(mostDown, down)
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) {
		var vm map[string]any
		if err := json.Unmarshal(f.Spec.Template.Raw, &vm); err != nil {
			t.Fatal(err)
		}
		domain := vm["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["domain"].(map[string]any)
		domain["memory"] = map[string]any{"guest": "2Gi"}
		raw, err := json.Marshal(vm)
		if err != nil {
			t.Fatal(err)
		}
		f.Spec.Template.Raw = raw
	})
	got := waitFVM(t, in, fvm, "revision 2 succeeded", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if r := f.Status.Rollout; r == nil || r.Revision != 2 || r.Phase != "Succeeded" || r.Updated != 2 {
			return fmt.Errorf("rollout %+v", r)
		}
		return nil
	})
	took := time.Since(start)
	cancel()
	<-done
	if got.Status.Rollout.PreviousRevision != 1 {
		t.Errorf("previous revision %d, want 1", got.Status.Rollout.PreviousRevision)
	}
	for _, c := range decided {
		waitSpoke(t, in, c, "the VM restarted on revision 2", func(ctx context.Context, sc client.Client) error {
			vmi := &kubevirtv1.VirtualMachineInstance{}
			if err := sc.Get(ctx, vmKey(fvm), vmi); err != nil {
				return err
			}
			if m := vmi.Spec.Domain.Memory; m == nil || m.Guest == nil || m.Guest.String() != "2Gi" {
				return fmt.Errorf("instance memory %v, want 2Gi", m)
			}
			return nil
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if mostDown > 1 {
		t.Errorf("the VM was down on %d clusters at once, want at most 1", mostDown)
	}
	if mostDown == 0 {
		t.Errorf("the VM was never seen down: no restart took the new memory")
	}
	t.Logf("Progressive rollout (maxConcurrency 1, minSuccessTime %s) of a memory change over %v with Argo CD: %s in all; "+
		"each cluster ready again on revision 2, restarted, after %v; at most %d down at once", soak, decided, took.Round(100*time.Millisecond), arrived, mostDown)
	deleteFVM(t, in, fvm)
}
