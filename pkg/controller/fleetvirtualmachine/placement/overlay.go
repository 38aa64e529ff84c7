package placement

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// A git source picks each cluster's overlay by the cluster's environment
// label. Switching the overlay is as drastic as moving the VM: Argo CD
// syncs the new overlay and prunes what it lacks. So a label change
// switches it only once the new value has held for the grace period, as a
// cluster leaves only once excluded for that long (decide.go). Pure: the
// status records the overlay (clusterEntry) and the ApplicationSet
// delivers what the status records (deliveryTargets).

// OverlayInput is what the overlay of one cluster is chosen from.
type OverlayInput struct {
	// Previous is the cluster's entry in the status before this
	// reconcile; nil when the cluster is newly placed (or the status was
	// lost, as after a hub restore): its label applies at once.
	Previous *fleetv1alpha1.ClusterStatus
	// Label is the cluster's environment label value ("" when it has
	// none); LabelKnown is false when the ManagedCluster cannot be read.
	Label      string
	LabelKnown bool
	// Placed: the FleetVirtualMachine wants the VM on the cluster. A
	// leaving or removing copy keeps the overlay it was placed for.
	Placed      bool
	Now         time.Time
	GracePeriod time.Duration
}

// OverlayChoice is the overlay the status records for a cluster.
type OverlayChoice struct {
	// Environment is the one the VM is delivered for.
	Environment string
	// Pending is the label value waiting for its grace period, seen first
	// at PendingSince (nil: none pending).
	Pending      string
	PendingSince *metav1.Time
}

// ChooseOverlay applies the rule: a newly placed cluster gets its label's
// overlay at once; a placed cluster whose label changed keeps its overlay
// until the new value has held for the grace period (a value that changes
// again restarts the wait; one that flaps back cancels it); a copy that
// leaves, or whose cluster cannot be read, keeps what it has.
func ChooseOverlay(in OverlayInput) OverlayChoice {
	prev := in.Previous
	if prev == nil {
		return OverlayChoice{Environment: in.Label}
	}
	if !in.LabelKnown {
		return OverlayChoice{Environment: prev.Environment, Pending: prev.PendingEnvironment, PendingSince: prev.PendingEnvironmentSince}
	}
	if !in.Placed || in.Label == prev.Environment {
		return OverlayChoice{Environment: prev.Environment}
	}
	since := prev.PendingEnvironmentSince
	if since == nil || prev.PendingEnvironment != in.Label {
		since = ptrTime(WholeSecondAfter(in.Now))
	}
	if OverlayWait(since, in.Now, in.GracePeriod) == 0 {
		return OverlayChoice{Environment: in.Label}
	}
	return OverlayChoice{Environment: prev.Environment, Pending: in.Label, PendingSince: since}
}

// OverlayWait is how long until a pending overlay switch is due: 0 when
// none is pending or it is due now.
func OverlayWait(since *metav1.Time, now time.Time, grace time.Duration) time.Duration {
	if since == nil {
		return 0
	}
	return max(0, since.Add(grace).Sub(now))
}

// OverlayWake is when the FleetVirtualMachine must be reconciled again
// for the pending overlay switches its status records (0: none).
func OverlayWake(clusters []fleetv1alpha1.ClusterStatus, now time.Time, grace time.Duration) time.Duration {
	var wake time.Duration
	for _, c := range clusters {
		if c.PendingEnvironmentSince == nil {
			continue
		}
		// Due now but not switched (the status was written before the
		// period ended): look again at once.
		w := max(OverlayWait(c.PendingEnvironmentSince, now, grace), time.Millisecond)
		if wake == 0 || w < wake {
			wake = w
		}
	}
	return wake
}

// WholeSecondAfter rounds t up to a whole second: the status keeps whole
// seconds, so a wait read back from it is never short.
func WholeSecondAfter(t time.Time) metav1.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return metav1.NewTime(s)
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }
