package fleetvirtualmachine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var (
	t0    = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	grace = 5 * time.Minute
)

func at(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(t0.Add(d))) }

func included() clusterIntent { return clusterIntent{Kind: intentIncluded} }
func excluded() clusterIntent {
	return clusterIntent{Kind: intentExcluded, Reason: "its env label is \"dev\", not \"prod\""}
}
func gone() clusterIntent {
	return clusterIntent{Kind: intentGone, Reason: "the ManagedCluster was deleted"}
}

// running is a cluster FleetVM placed the VM on, with its Application and
// the agent's report.
func running() presence { return presence{Recorded: true, App: appLive, Reported: true} }

// summaryOf reduces an outcome to what the cases compare.
type summaryOf struct {
	States    map[string]string
	Remove    []string
	Release   []string
	Dropped   []string
	LookAgain time.Duration
	Surplus   []string
}

func summarizeOutcome(o placementOutcome) summaryOf {
	s := summaryOf{States: map[string]string{}, Remove: o.Remove, Release: o.Release, Dropped: o.Dropped, LookAgain: o.LookAgain, Surplus: o.Surplus}
	for c, p := range o.Clusters {
		st := string(p.State)
		if p.Added {
			st += "+added"
		}
		if p.Blocked {
			st += "+blocked"
		}
		if p.Since != nil {
			st += "@" + p.Since.Sub(t0).String()
		}
		s.States[c] = st
	}
	return s
}

func TestDecidePlacement(t *testing.T) {
	cases := map[string]struct {
		in   placementInput
		want summaryOf
	}{
		"new: the scheduler's clusters are added": {
			in: placementInput{Now: t0, Scheduled: true, Decision: []string{"a", "b"},
				Intent: map[string]clusterIntent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed+added", "b": "Placed+added"}},
		},
		"not scheduled yet: nothing added": {
			in: placementInput{Now: t0, Scheduled: false, Decision: []string{"a"},
				Intent: map[string]clusterIntent{"a": included()}},
			want: summaryOf{States: map[string]string{}},
		},
		"a decided cluster the intent excludes (stale decision) is not added": {
			in: placementInput{Now: t0, Scheduled: true, Decision: []string{"a", "b"},
				Intent: map[string]clusterIntent{"a": included(), "b": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Placed+added"}},
		},
		"full cluster drops out of the decision: the VM stays, no copy elsewhere": {
			in: placementInput{Now: t0, Scheduled: true, Desired: ptr.To(int32(1)), Decision: []string{"b"},
				Clusters: map[string]presence{"a": running()},
				Intent:   map[string]clusterIntent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed"}},
		},
		"unreachable cluster (out of the decision by its taint): stays, not replaced": {
			in: placementInput{Now: t0.Add(10 * grace), Scheduled: true, Desired: ptr.To(int32(2)), Decision: []string{"b", "c"},
				Clusters: map[string]presence{"a": running(), "b": running()},
				Intent:   map[string]clusterIntent{"a": included(), "b": included(), "c": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
		},
		"Placement deleted by hand, empty decision: nothing removed": {
			in: placementInput{Now: t0.Add(10 * grace), Scheduled: false,
				Clusters: map[string]presence{"a": running(), "b": running()},
				Intent:   map[string]clusterIntent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
		},
		"status lost: the Applications still count": {
			in: placementInput{Now: t0, Scheduled: true, Desired: ptr.To(int32(2)), Decision: []string{"c", "d"},
				Clusters: map[string]presence{"a": {App: appLive, Reported: true}, "b": {App: appLive}},
				Intent:   map[string]clusterIntent{"a": included(), "b": included(), "c": included(), "d": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
		},
		"a copy only an agent reports (left by an earlier FleetVM) is adopted: no second copy": {
			in: placementInput{Now: t0, Scheduled: true, Desired: ptr.To(int32(1)), Decision: []string{"b"},
				Clusters: map[string]presence{"a": {Reported: true}},
				Intent:   map[string]clusterIntent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed"}},
		},
		"restored hub, no status, no Applications: every reported copy adopted, none added": {
			in: placementInput{Now: t0, Scheduled: true, Desired: ptr.To(int32(2)), Decision: []string{"c", "d"},
				Clusters: map[string]presence{"a": {Reported: true}, "b": {Reported: true}},
				Intent:   map[string]clusterIntent{"a": included(), "b": included(), "c": included(), "d": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
		},
		"an adopted copy the intent excludes leaves by the grace-period rule": {
			in: placementInput{Now: t0, GracePeriod: grace, Scheduled: true, Desired: ptr.To(int32(1)), Decision: []string{"b"},
				Clusters: map[string]presence{"a": {Reported: true}},
				Intent:   map[string]clusterIntent{"a": excluded(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Leaving@0s"}, LookAgain: grace},
		},
		"an unreachable cluster's reported copy counts: not replaced": {
			in: placementInput{Now: t0, Scheduled: true, Desired: ptr.To(int32(1)), Decision: []string{"b"},
				Clusters: map[string]presence{"a": {Reported: true}},
				Intent:   map[string]clusterIntent{"b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed"}},
		},
		"a cluster back from an exclusion while copies are too many: kept, not trimmed": {
			in: placementInput{Now: t0.Add(time.Minute), GracePeriod: grace, Desired: ptr.To(int32(1)), DesiredBefore: ptr.To(int32(1)), Scheduled: true,
				Decision: []string{"a"},
				Clusters: map[string]presence{"a": running(), "b": {Recorded: true, App: appLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]clusterIntent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}, Surplus: []string{"b"}},
		},
		"more copies run than asked (found, not asked away): all kept, shown as surplus": {
			in: placementInput{Now: t0, GracePeriod: grace, Scheduled: true, Desired: ptr.To(int32(1)), DesiredBefore: ptr.To(int32(1)),
				Decision: []string{"a"},
				Clusters: map[string]presence{"a": running(), "b": {Reported: true}},
				Intent:   map[string]clusterIntent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}, Surplus: []string{"b"}},
		},
		"label changed: leaving, look again when the grace period ends": {
			in: placementInput{Now: t0, GracePeriod: grace, Scheduled: true, Decision: nil,
				Clusters: map[string]presence{"a": running()},
				Intent:   map[string]clusterIntent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Leaving@0s"}, LookAgain: grace},
		},
		"leaving, back before the grace period ends: placed again": {
			in: placementInput{Now: t0.Add(grace - time.Second), GracePeriod: grace, Scheduled: true, Decision: []string{"a"},
				Clusters: map[string]presence{"a": {Recorded: true, App: appLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]clusterIntent{"a": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed"}},
		},
		"leaving one second short of the grace period: kept": {
			in: placementInput{Now: t0.Add(grace - time.Second), GracePeriod: grace,
				Clusters: map[string]presence{"a": {Recorded: true, App: appLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]clusterIntent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Leaving@0s"}, LookAgain: time.Second},
		},
		"leaving past the grace period: removed": {
			in: placementInput{Now: t0.Add(grace), GracePeriod: grace,
				Clusters: map[string]presence{"a": {Recorded: true, App: appLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]clusterIntent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Removing@5m0s"}, Remove: []string{"a"}},
		},
		"past the grace period but Argo CD would orphan the VM: waits": {
			in: placementInput{Now: t0.Add(2 * grace), GracePeriod: grace,
				Clusters: map[string]presence{"a": {Recorded: true, App: appLive, Reported: true, LeavingSince: at(0),
					AppBlocked: "Argo CD reports the Application invalid"}},
				Intent: map[string]clusterIntent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Leaving+blocked@0s"}},
		},
		"past the grace period, Application deleted by hand: waits for it to come back": {
			in: placementInput{Now: t0.Add(2 * grace), GracePeriod: grace,
				Clusters: map[string]presence{"a": {Recorded: true, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]clusterIntent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Leaving+blocked@0s"}},
		},
		"cluster facts unreadable while leaving: nothing removed": {
			in: placementInput{Now: t0.Add(10 * grace), GracePeriod: grace,
				Clusters: map[string]presence{"a": {Recorded: true, App: appLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]clusterIntent{}},
			want: summaryOf{States: map[string]string{"a": "Leaving+blocked@0s"}},
		},
		"ManagedCluster deleted past the grace period: released, forgotten": {
			in: placementInput{Now: t0.Add(grace), GracePeriod: grace,
				Clusters: map[string]presence{"a": {Recorded: true, App: appLive, LeavingSince: at(0)}},
				Intent:   map[string]clusterIntent{"a": gone()}},
			want: summaryOf{States: map[string]string{}, Release: []string{"a"}, Dropped: []string{"a"}},
		},
		"removing: kept until the agent no longer reports the VM": {
			in: placementInput{Now: t0.Add(grace + time.Minute), GracePeriod: grace,
				Clusters: map[string]presence{"a": {Recorded: true, RemovingSince: at(grace), Reported: true}},
				Intent:   map[string]clusterIntent{"a": included()}},
			want: summaryOf{States: map[string]string{"a": "Removing@5m0s"}},
		},
		"removing, recreated by a stale generator: removed again": {
			in: placementInput{Now: t0.Add(grace + time.Minute), GracePeriod: grace,
				Clusters: map[string]presence{"a": {Recorded: true, RemovingSince: at(grace), App: appLive, Reported: true}},
				Intent:   map[string]clusterIntent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Removing@5m0s"}, Remove: []string{"a"}},
		},
		"removal confirmed: dropped, and the move's new copy starts": {
			in: placementInput{Now: t0.Add(grace + time.Minute), GracePeriod: grace, Desired: ptr.To(int32(1)),
				Scheduled: true, Decision: []string{"b"},
				Clusters: map[string]presence{"a": {Recorded: true, RemovingSince: at(grace)}},
				Intent:   map[string]clusterIntent{"a": excluded(), "b": included()}},
			want: summaryOf{States: map[string]string{"b": "Placed+added"}, Dropped: []string{"a"}},
		},
		"a move waits: no new copy while the old one leaves": {
			in: placementInput{Now: t0, GracePeriod: grace, Desired: ptr.To(int32(1)), Scheduled: true, Decision: []string{"b"},
				Clusters: map[string]presence{"a": running()},
				Intent:   map[string]clusterIntent{"a": excluded(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Leaving@0s"}, LookAgain: grace},
		},
		"clusters lowered 3 to 2: the one the scheduler no longer picks leaves": {
			in: placementInput{Now: t0, GracePeriod: grace, Desired: ptr.To(int32(2)), DesiredBefore: ptr.To(int32(3)), Scheduled: true, Decision: []string{"a", "c"},
				Clusters: map[string]presence{"a": running(), "b": running(), "c": running()},
				Intent:   map[string]clusterIntent{"a": included(), "b": included(), "c": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Leaving@0s", "c": "Placed"}, LookAgain: grace},
		},
		"clusters lowered: the surplus choice does not flap": {
			in: placementInput{Now: t0.Add(time.Minute), GracePeriod: grace, Desired: ptr.To(int32(2)), Scheduled: true, Decision: []string{"a", "b"},
				Clusters: map[string]presence{"a": running(), "b": {Recorded: true, App: appLive, Reported: true, LeavingSince: at(0), LeavingForSurplus: true}, "c": running()},
				Intent:   map[string]clusterIntent{"a": included(), "b": included(), "c": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Leaving@0s", "c": "Placed"}, LookAgain: grace - time.Minute},
		},
		"every cluster that qualifies: new ones added, none counted": {
			in: placementInput{Now: t0, Scheduled: true, Decision: []string{"a", "b", "c"},
				Clusters: map[string]presence{"a": running(), "z": running()},
				Intent:   map[string]clusterIntent{"a": included(), "b": included(), "c": included(), "z": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed+added", "c": "Placed+added", "z": "Placed"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.in.GracePeriod == 0 {
				tc.in.GracePeriod = grace
			}
			got := summarizeOutcome(decidePlacement(tc.in))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("outcome (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDecideNeverRemovesEarly runs many random sequences of reconciles and
// checks the rule on every step (see checkSequence).
func TestDecideNeverRemovesEarly(t *testing.T) {
	for seed := range uint64(3000) {
		if err := checkSequence(rand.New(rand.NewPCG(seed, seed*7919+1)), 60); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// FuzzDecidePlacement drives the same sequences from fuzzer input.
func FuzzDecidePlacement(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint8(40))
	f.Add(uint64(42), uint64(0), uint8(200))
	f.Fuzz(func(t *testing.T, a, b uint64, steps uint8) {
		if err := checkSequence(rand.New(rand.NewPCG(a, b)), int(steps)); err != nil {
			t.Fatal(err)
		}
	})
}

// checkSequence simulates reconciles of one FleetVirtualMachine on five
// clusters: at each step time passes (often less than the grace period),
// cluster labels and sets flap, facts are sometimes unreadable, clusters
// are deleted and come back, the scheduler answers anything (stale, empty,
// not at all), Applications are deleted by hand or created late by Argo
// CD, agents report or not, and the status is sometimes lost. The number
// of copies asked for is fixed. On every step:
//
//   - a cluster's VM is removed (or let go) only if every observation of
//     the cluster for at least the grace period before excluded it;
//   - only clusters with a live Application are removed;
//   - new copies go only to clusters the scheduler picked for the current
//     Placement and the intent includes, and never past the number asked
//     for (every copy counted, leaving, removing or unreachable);
//   - a cluster is never both delivered to and removed.
func checkSequence(rng *rand.Rand, steps int) error {
	clusters := []string{"a", "b", "c", "d", "e"}
	var desired *int32
	if rng.IntN(3) > 0 {
		desired = ptr.To(int32(1 + rng.IntN(3)))
	}
	now := t0
	actual := map[string]intentKind{}
	for _, c := range clusters {
		actual[c] = []intentKind{intentIncluded, intentIncluded, intentExcluded}[rng.IntN(3)]
	}
	// excludedSince is when the cluster was first observed not included
	// since it was last observed included (nil: observed included last).
	excludedSince := map[string]*time.Time{}
	status := map[string]clusterPlan{}
	apps := map[string]appPresence{}
	reported := map[string]bool{}

	for step := range steps {
		// Time passes: mostly less than the grace period, in milliseconds
		// (the status keeps seconds).
		switch rng.IntN(4) {
		case 0:
			now = now.Add(time.Duration(rng.IntN(int(grace/time.Millisecond))) * time.Millisecond)
		case 1:
			now = now.Add(grace + time.Duration(rng.IntN(60_000))*time.Millisecond)
		default:
			now = now.Add(time.Duration(rng.IntN(20_000)) * time.Millisecond)
		}
		// Intent flaps.
		for _, c := range clusters {
			if rng.IntN(4) == 0 {
				actual[c] = []intentKind{intentIncluded, intentExcluded, intentGone}[rng.IntN(3)]
			}
		}
		in := placementInput{Now: now, GracePeriod: grace, Desired: desired, Scheduled: rng.IntN(3) > 0,
			Clusters: map[string]presence{}, Intent: map[string]clusterIntent{}}
		for _, c := range clusters {
			if rng.IntN(2) == 0 {
				in.Decision = append(in.Decision, c)
			}
			observed := clusterIntent{Kind: actual[c], Reason: "flapped"}
			if rng.IntN(10) == 0 {
				observed = clusterIntent{Kind: intentUnknown}
			}
			in.Intent[c] = observed
			switch observed.Kind {
			case intentIncluded:
				excludedSince[c] = nil
			case intentExcluded, intentGone:
				if excludedSince[c] == nil {
					excludedSince[c] = ptr.To(now)
				}
			}
		}
		// Things done by hand, and Argo CD's and the agents' lag.
		if rng.IntN(15) == 0 {
			status = map[string]clusterPlan{} // status lost
		}
		for _, c := range clusters {
			if apps[c] == appLive && rng.IntN(12) == 0 {
				apps[c] = appNone // deleted by hand, no finalizer
			}
			if apps[c] == appDeleting && rng.IntN(2) == 0 {
				apps[c] = appNone
				reported[c] = rng.IntN(3) == 0 // Argo CD may have left it
			}
			p := presence{App: apps[c], Reported: reported[c]}
			if s, ok := status[c]; ok {
				p.Recorded = true
				switch s.State {
				case stateLeaving:
					p.LeavingSince = s.Since
				case stateRemoving:
					p.RemovingSince = s.Since
				}
			}
			if apps[c] == appLive && rng.IntN(8) == 0 {
				p.AppBlocked = "Argo CD reports the Application invalid"
			}
			in.Clusters[c] = p
		}
		copiesBefore := 0
		for _, c := range clusters {
			if in.Clusters[c].present() {
				copiesBefore++
			}
		}

		out := decidePlacement(in)

		fail := func(format string, args ...any) error {
			return fmt.Errorf("step %d at +%s: %s\ninput: %+v\noutcome: %+v", step, now.Sub(t0), fmt.Sprintf(format, args...), in, out)
		}
		for _, c := range slices.Concat(out.Remove, out.Release) {
			since := excludedSince[c]
			if since == nil || now.Sub(*since) < grace {
				return fail("cluster %s removed after being excluded since %v (grace %s)", c, since, grace)
			}
		}
		for _, c := range out.Remove {
			if in.Clusters[c].App != appLive {
				return fail("cluster %s removed without a live Application", c)
			}
			if p := out.Clusters[c]; p.State != stateRemoving {
				return fail("cluster %s removed but recorded %s", c, p.State)
			}
		}
		added := 0
		for c, p := range out.Clusters {
			if !p.Added {
				continue
			}
			added++
			if !in.Scheduled || !slices.Contains(in.Decision, c) || in.Intent[c].Kind != intentIncluded || in.Clusters[c].present() {
				return fail("cluster %s added without the scheduler's current pick and the intent", c)
			}
		}
		if desired != nil && added > 0 && len(out.Clusters) > int(*desired) {
			return fail("%d copies recorded for %d asked (%d before)", len(out.Clusters), *desired, copiesBefore)
		}

		// The shell acts: the status records the outcome, Argo CD creates
		// the delivered clusters' Applications (sometimes late) and
		// deletes the removed ones, the agents report what runs.
		status = stored(out.Clusters)
		for _, c := range out.delivered() {
			if apps[c] == appNone && rng.IntN(3) > 0 {
				apps[c] = appLive
				reported[c] = true
			}
		}
		for _, c := range out.Remove {
			apps[c] = appDeleting
		}
		for _, c := range out.Release {
			apps[c] = appNone
		}
		for _, c := range out.Dropped {
			if _, ok := status[c]; ok {
				return fail("cluster %s both dropped and recorded", c)
			}
		}
	}
	return nil
}

// stored is the status as the API server keeps it: times to the second
// (metav1.Time is serialized as RFC 3339 without fractions).
func stored(plans map[string]clusterPlan) map[string]clusterPlan {
	out := make(map[string]clusterPlan, len(plans))
	for c, p := range plans {
		if p.Since != nil {
			p.Since = ptr.To(metav1.NewTime(p.Since.Truncate(time.Second)))
		}
		out[c] = p
	}
	return out
}
