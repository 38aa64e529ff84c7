package fleet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A goroutine profile as the hub serves it (debug=1), cut to the frames
// that matter: two workers waiting on the client's rate limiter in
// ensureNamespaces, one with a request in flight from the status write,
// one computing the status, idle workers, and an informer.
const sampleDump = `goroutine profile: total 9
2 @ 0x1 0x2
#	0x1	k8s.io/client-go/util/flowcontrol.(*tokenBucketPassiveRateLimiter).Wait+0x5	a.go:1
#	0x2	k8s.io/client-go/rest.(*Request).tryThrottle+0x9	b.go:2
#	0x3	github.com/fleetvm/fleetvm/pkg/write.Ensure+0x1	c.go:3
#	0x4	github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine.(*Reconciler).ensureNamespaces+0x1	d.go:4
#	0x5	github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine.(*Reconciler).Reconcile+0x1	e.go:5
#	0x6	sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller[...]).processNextWorkItem+0x1	f.go:6

1 @ 0x1 0x2
#	0x1	net/http.(*persistConn).roundTrip+0x5	a.go:1
#	0x2	k8s.io/client-go/rest.(*Request).Do+0x9	b.go:2
#	0x4	github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine.(*Reconciler).patchStatusIfChanged+0x1	d.go:4
#	0x6	sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller[...]).processNextWorkItem+0x1	f.go:6

1 @ 0x1 0x2
#	0x1	encoding/json.Marshal+0x5	a.go:1
#	0x4	github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status.Compute+0x1	d.go:4
#	0x5	github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine.(*Reconciler).record+0x1	e.go:5
#	0x6	sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller[...]).processNextWorkItem+0x1	f.go:6

4 @ 0x1 0x2
#	0x1	k8s.io/client-go/util/workqueue.(*Typed[...]).Get+0x5	a.go:1
#	0x6	sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller[...]).processNextWorkItem+0x1	f.go:6

1 @ 0x1 0x2
#	0x1	k8s.io/client-go/tools/cache.(*Reflector).watch+0x5	a.go:1
`

// TestWaitProfile: busy FleetVirtualMachine workers are sorted by what
// they wait on and where, and idle workers and other goroutines are left
// out.
func TestWaitProfile(t *testing.T) {
	p := &waitProfile{kinds: map[string]int{}, where: map[string]int{}}
	p.add(sampleDump)
	p.add(sampleDump)
	wantKinds := map[string]int{waitRateLimiter: 4, waitRequest: 2, waitRunning: 2}
	if diff := cmp.Diff(wantKinds, p.kinds); diff != "" {
		t.Errorf("kinds (-want,+got):\n%s", diff)
	}
	wantWhere := map[string]int{
		"pkg/write.Ensure — " + waitRateLimiter:                                                  4,
		"pkg/controller/fleetvirtualmachine.(*Reconciler).patchStatusIfChanged — " + waitRequest: 2,
		"pkg/controller/fleetvirtualmachine/status.Compute — " + waitRunning:                     2,
	}
	if diff := cmp.Diff(wantWhere, p.where); diff != "" {
		t.Errorf("where (-want,+got):\n%s", diff)
	}
	r := &Report{}
	p.addRows(r, "burst")
	for name, want := range map[string]float64{
		"burst: FleetVirtualMachine workers busy, on average":          4,
		"burst: busy workers' time: " + waitRateLimiter:                50,
		"burst: busy workers at pkg/write.Ensure — " + waitRateLimiter: 50,
	} {
		if got, ok := r.Value(name); !ok || got != want {
			t.Errorf("%s = %v (found %v), want %v", name, got, ok, want)
		}
	}
}
