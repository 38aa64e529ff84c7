// Package kubectlfleetvm runs the kubectl-fleetvm command, flags and all,
// against a real hub API server. No hub controller runs: the tests write
// the status the hub would, through the status subresource, and play the
// hub's part while start, stop, restart, move and drain wait.
package kubectlfleetvm

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/kubectlfleetvm"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

const wait = 30 * time.Second

var fleet *fleetenv.Fleet

// TestMain starts a hub for the package; no controller runs.
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet: fleetenv.Options{NoPlacementController: true},
		Setup: func(_ context.Context, f *fleetenv.Fleet) (func() error, error) {
			fleet = f
			return nil, nil
		},
	}))
}

// running is one run of `kubectl fleetvm ARGS`, possibly still going.
type running struct {
	out, errOut *syncBuffer
	// opened has a line for each link the command opened (console --open):
	// the browser is never started.
	opened *syncBuffer
	done   chan struct{}
	err    error
}

// wait waits for the command to return, at most the test's wait.
func (r *running) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(wait):
		t.Fatalf("the command did not return within %s\nstdout:\n%s\nstderr:\n%s", wait, r.out, r.errOut)
	}
}

// printed waits until the command wrote s to stderr (its progress).
func (r *running) printed(t *testing.T, s string) {
	t.Helper()
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		return strings.Contains(r.errOut.String(), s), nil
	})
	if err != nil {
		t.Fatalf("the command never printed %q: %v\nstderr:\n%s", s, err, r.errOut)
	}
}

// wrote waits until the command wrote s to stdout.
func (r *running) wrote(t *testing.T, s string) {
	t.Helper()
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		return strings.Contains(r.out.String(), s), nil
	})
	if err != nil {
		t.Fatalf("the command never wrote %q: %v\nstdout:\n%s", s, err, r.out)
	}
}

// syncBuffer lets the test read what a command still running wrote.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start starts `kubectl fleetvm ARGS` against the hub, flags and all, as a
// user would, with the clock at now (zero: the real clock).
func start(ctx context.Context, now time.Time, args ...string) *running {
	r := &running{out: &syncBuffer{}, errOut: &syncBuffer{}, opened: &syncBuffer{}, done: make(chan struct{})}
	cfg := kubectlfleetvm.Config{
		IOStreams:    genericiooptions.IOStreams{Out: r.out, ErrOut: r.errOut},
		PollInterval: 50 * time.Millisecond,
		Open: func(url string) error {
			_, err := r.opened.Write([]byte(url + "\n"))
			return err
		},
	}
	if !now.IsZero() {
		cfg.Now = func() time.Time { return now }
	}
	cmd := kubectlfleetvm.NewCommand(cfg)
	cmd.SetArgs(append([]string{"--kubeconfig", fleet.Hub.Kubeconfig}, args...))
	go func() {
		defer close(r.done)
		r.err = cmd.ExecuteContext(ctx)
	}()
	return r
}

// result is what one finished run printed, opened and returned.
type result struct {
	out, errOut, opened string
	err                 error
}

// kubectl runs `kubectl fleetvm ARGS` to the end.
func kubectl(t *testing.T, now time.Time, args ...string) result {
	t.Helper()
	r := start(t.Context(), now, args...)
	r.wait(t)
	return result{out: r.out.String(), errOut: r.errOut.String(), opened: r.opened.String(), err: r.err}
}

func key(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// lines trims the trailing spaces tabwriter leaves.
func lines(s string) string {
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(ls, "\n")
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	if err := fleet.Hub.Tenant(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// newFVM is a FleetVirtualMachine with every kind of spec field set, so a
// test can tell that a patch touched only what it should.
func newFVM(ns, name string, rs fleetv1alpha1.RunStrategy) *fleetv1alpha1.FleetVirtualMachine {
	return utiltesting.MakeFleetVM(ns, name).Label("team", "web").Annotation("owner", "alice").
		VM(2, "4Gi").VMMetadata(map[string]any{"labels": map[string]any{"app": "web"}}).
		Clusters(2).ClusterSets("default").RunStrategy(rs).DiskImages("rhel9").
		DeletionPolicy(fleetv1alpha1.DeletionPolicyOrphan).
		Delivery(fleetv1alpha1.Delivery{SyncMode: fleetv1alpha1.SyncModeManual, Prune: ptr.To(false)}).Obj()
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := fleet.Hub.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func get(t *testing.T, ns, name string) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(t.Context(), key(ns, name), fvm); err != nil {
		t.Fatal(err)
	}
	return fvm
}

// setStatus writes the status as the hub controller would, for the
// object's current generation.
func setStatus(ctx context.Context, ns, name string, mut func(*fleetv1alpha1.FleetVirtualMachine)) error {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fvm); err != nil {
		return err
	}
	fvm.Status.ObservedGeneration = fvm.Generation
	mut(fvm)
	return fleet.Hub.Client.Status().Update(ctx, fvm)
}

// copyOn is a status entry of a copy running on cluster, on node.
func copyOn(cluster, node string) fleetv1alpha1.ClusterStatus {
	return fleetv1alpha1.ClusterStatus{Cluster: cluster, Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseRunning, Ready: true, Node: node}
}

func placeOn(t *testing.T, ns, name string, entries ...fleetv1alpha1.ClusterStatus) {
	t.Helper()
	if err := setStatus(t.Context(), ns, name, func(f *fleetv1alpha1.FleetVirtualMachine) { f.Status.Clusters = entries }); err != nil {
		t.Fatal(err)
	}
}

// clusters returns status entries in the same phase, ready when Running.
func clusters(phase fleetv1alpha1.ClusterPhase, names ...string) []fleetv1alpha1.ClusterStatus {
	var out []fleetv1alpha1.ClusterStatus
	for _, n := range names {
		out = append(out, fleetv1alpha1.ClusterStatus{Cluster: n, Environment: "prod", Phase: phase, Ready: phase == fleetv1alpha1.ClusterPhaseRunning})
	}
	return out
}

// waitRunStrategy waits until spec.runStrategy is rs.
func waitRunStrategy(t *testing.T, ns, name string, rs fleetv1alpha1.RunStrategy) {
	t.Helper()
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		fvm := &fleetv1alpha1.FleetVirtualMachine{}
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, fvm); err != nil {
			return false, err
		}
		return fvm.Spec.RunStrategy == rs, nil
	})
	if err != nil {
		t.Fatalf("runStrategy of %s/%s never became %s: %v", ns, name, rs, err)
	}
}
