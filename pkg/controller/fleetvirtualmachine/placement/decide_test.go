package placement

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

func included() Intent { return Intent{Kind: IntentIncluded} }
func excluded() Intent {
	return Intent{Kind: IntentExcluded, Reason: "its env label is \"dev\", not \"prod\""}
}
func gone() Intent {
	return Intent{Kind: IntentGone, Reason: "the ManagedCluster was deleted"}
}

// running is a cluster FleetVM placed the VM on, with its Application and
// the agent's report.
func running() Presence { return Presence{Recorded: true, App: AppLive, Reported: true} }

// summaryOf reduces an outcome to what the cases compare.
type summaryOf struct {
	States    map[string]string
	Remove    []string
	Release   []string
	Dropped   []string
	LookAgain time.Duration
	Surplus   []string
}

func summarizeOutcome(o Outcome) summaryOf {
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
		in   Input
		want summaryOf
	}{
		"new: the scheduler's clusters are added": {
			in: Input{Now: t0, Scheduled: true, Decision: []string{"a", "b"},
				Intent: map[string]Intent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed+added", "b": "Placed+added"}},
		},
		"not scheduled yet: nothing added": {
			in: Input{Now: t0, Scheduled: false, Decision: []string{"a"},
				Intent: map[string]Intent{"a": included()}},
			want: summaryOf{States: map[string]string{}},
		},
		"a decided cluster the intent excludes (stale decision) is not added": {
			in: Input{Now: t0, Scheduled: true, Decision: []string{"a", "b"},
				Intent: map[string]Intent{"a": included(), "b": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Placed+added"}},
		},
		"full cluster drops out of the decision: the VM stays, no copy elsewhere": {
			in: Input{Now: t0, Scheduled: true, Desired: ptr.To(int32(1)), Decision: []string{"b"},
				Clusters: map[string]Presence{"a": running()},
				Intent:   map[string]Intent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed"}},
		},
		"unreachable cluster (out of the decision by its taint): stays, not replaced": {
			in: Input{Now: t0.Add(10 * grace), Scheduled: true, Desired: ptr.To(int32(2)), Decision: []string{"b", "c"},
				Clusters: map[string]Presence{"a": running(), "b": running()},
				Intent:   map[string]Intent{"a": included(), "b": included(), "c": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
		},
		"Placement deleted by hand, empty decision: nothing removed": {
			in: Input{Now: t0.Add(10 * grace), Scheduled: false,
				Clusters: map[string]Presence{"a": running(), "b": running()},
				Intent:   map[string]Intent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
		},
		"status lost: the Applications still count": {
			in: Input{Now: t0, Scheduled: true, Desired: ptr.To(int32(2)), Decision: []string{"c", "d"},
				Clusters: map[string]Presence{"a": {App: AppLive, Reported: true}, "b": {App: AppLive}},
				Intent:   map[string]Intent{"a": included(), "b": included(), "c": included(), "d": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
		},
		"a copy only an agent reports (left by an earlier FleetVM) is adopted: no second copy": {
			in: Input{Now: t0, Scheduled: true, Desired: ptr.To(int32(1)), Decision: []string{"b"},
				Clusters: map[string]Presence{"a": {Reported: true}},
				Intent:   map[string]Intent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed"}},
		},
		"restored hub, no status, no Applications: every reported copy adopted, none added": {
			in: Input{Now: t0, Scheduled: true, Desired: ptr.To(int32(2)), Decision: []string{"c", "d"},
				Clusters: map[string]Presence{"a": {Reported: true}, "b": {Reported: true}},
				Intent:   map[string]Intent{"a": included(), "b": included(), "c": included(), "d": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
		},
		"an adopted copy the intent excludes leaves by the grace-period rule": {
			in: Input{Now: t0, GracePeriod: grace, Scheduled: true, Desired: ptr.To(int32(1)), Decision: []string{"b"},
				Clusters: map[string]Presence{"a": {Reported: true}},
				Intent:   map[string]Intent{"a": excluded(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Leaving@0s"}, LookAgain: grace},
		},
		"an unreachable cluster's reported copy counts: not replaced": {
			in: Input{Now: t0, Scheduled: true, Desired: ptr.To(int32(1)), Decision: []string{"b"},
				Clusters: map[string]Presence{"a": {Reported: true}},
				Intent:   map[string]Intent{"b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed"}},
		},
		"a cluster back from an exclusion while copies are too many: kept, not trimmed": {
			in: Input{Now: t0.Add(time.Minute), GracePeriod: grace, Desired: ptr.To(int32(1)), DesiredBefore: ptr.To(int32(1)), Scheduled: true,
				Decision: []string{"a"},
				Clusters: map[string]Presence{"a": running(), "b": {Recorded: true, App: AppLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]Intent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}, Surplus: []string{"b"}},
		},
		"more copies run than asked (found, not asked away): all kept, shown as surplus": {
			in: Input{Now: t0, GracePeriod: grace, Scheduled: true, Desired: ptr.To(int32(1)), DesiredBefore: ptr.To(int32(1)),
				Decision: []string{"a"},
				Clusters: map[string]Presence{"a": running(), "b": {Reported: true}},
				Intent:   map[string]Intent{"a": included(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}, Surplus: []string{"b"}},
		},
		"label changed: leaving, look again when the grace period ends": {
			in: Input{Now: t0, GracePeriod: grace, Scheduled: true, Decision: nil,
				Clusters: map[string]Presence{"a": running()},
				Intent:   map[string]Intent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Leaving@0s"}, LookAgain: grace},
		},
		"leaving, back before the grace period ends: placed again": {
			in: Input{Now: t0.Add(grace - time.Second), GracePeriod: grace, Scheduled: true, Decision: []string{"a"},
				Clusters: map[string]Presence{"a": {Recorded: true, App: AppLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]Intent{"a": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed"}},
		},
		"leaving one second short of the grace period: kept": {
			in: Input{Now: t0.Add(grace - time.Second), GracePeriod: grace,
				Clusters: map[string]Presence{"a": {Recorded: true, App: AppLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]Intent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Leaving@0s"}, LookAgain: time.Second},
		},
		"leaving past the grace period: removed": {
			in: Input{Now: t0.Add(grace), GracePeriod: grace,
				Clusters: map[string]Presence{"a": {Recorded: true, App: AppLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]Intent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Removing@5m0s"}, Remove: []string{"a"}},
		},
		"past the grace period but Argo CD would orphan the VM: waits": {
			in: Input{Now: t0.Add(2 * grace), GracePeriod: grace,
				Clusters: map[string]Presence{"a": {Recorded: true, App: AppLive, Reported: true, LeavingSince: at(0),
					AppBlocked: "Argo CD reports the Application invalid"}},
				Intent: map[string]Intent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Leaving+blocked@0s"}},
		},
		"past the grace period, Application deleted by hand: waits for it to come back": {
			in: Input{Now: t0.Add(2 * grace), GracePeriod: grace,
				Clusters: map[string]Presence{"a": {Recorded: true, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]Intent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Leaving+blocked@0s"}},
		},
		"cluster facts unreadable while leaving: nothing removed": {
			in: Input{Now: t0.Add(10 * grace), GracePeriod: grace,
				Clusters: map[string]Presence{"a": {Recorded: true, App: AppLive, Reported: true, LeavingSince: at(0)}},
				Intent:   map[string]Intent{}},
			want: summaryOf{States: map[string]string{"a": "Leaving+blocked@0s"}},
		},
		"ManagedCluster deleted past the grace period: released, forgotten": {
			in: Input{Now: t0.Add(grace), GracePeriod: grace,
				Clusters: map[string]Presence{"a": {Recorded: true, App: AppLive, LeavingSince: at(0)}},
				Intent:   map[string]Intent{"a": gone()}},
			want: summaryOf{States: map[string]string{}, Release: []string{"a"}, Dropped: []string{"a"}},
		},
		"removing: kept until the agent no longer reports the VM": {
			in: Input{Now: t0.Add(grace + time.Minute), GracePeriod: grace,
				Clusters: map[string]Presence{"a": {Recorded: true, RemovingSince: at(grace), Reported: true}},
				Intent:   map[string]Intent{"a": included()}},
			want: summaryOf{States: map[string]string{"a": "Removing@5m0s"}},
		},
		"removing, recreated by a stale generator: removed again": {
			in: Input{Now: t0.Add(grace + time.Minute), GracePeriod: grace,
				Clusters: map[string]Presence{"a": {Recorded: true, RemovingSince: at(grace), App: AppLive, Reported: true}},
				Intent:   map[string]Intent{"a": excluded()}},
			want: summaryOf{States: map[string]string{"a": "Removing@5m0s"}, Remove: []string{"a"}},
		},
		"removal confirmed: dropped, and the move's new copy starts": {
			in: Input{Now: t0.Add(grace + time.Minute), GracePeriod: grace, Desired: ptr.To(int32(1)),
				Scheduled: true, Decision: []string{"b"},
				Clusters: map[string]Presence{"a": {Recorded: true, RemovingSince: at(grace)}},
				Intent:   map[string]Intent{"a": excluded(), "b": included()}},
			want: summaryOf{States: map[string]string{"b": "Placed+added"}, Dropped: []string{"a"}},
		},
		"a move waits: no new copy while the old one leaves": {
			in: Input{Now: t0, GracePeriod: grace, Desired: ptr.To(int32(1)), Scheduled: true, Decision: []string{"b"},
				Clusters: map[string]Presence{"a": running()},
				Intent:   map[string]Intent{"a": excluded(), "b": included()}},
			want: summaryOf{States: map[string]string{"a": "Leaving@0s"}, LookAgain: grace},
		},
		"clusters lowered 3 to 2: the one the scheduler no longer picks leaves": {
			in: Input{Now: t0, GracePeriod: grace, Desired: ptr.To(int32(2)), DesiredBefore: ptr.To(int32(3)), Scheduled: true, Decision: []string{"a", "c"},
				Clusters: map[string]Presence{"a": running(), "b": running(), "c": running()},
				Intent:   map[string]Intent{"a": included(), "b": included(), "c": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Leaving@0s", "c": "Placed"}, LookAgain: grace},
		},
		"clusters lowered: the surplus choice does not flap": {
			in: Input{Now: t0.Add(time.Minute), GracePeriod: grace, Desired: ptr.To(int32(2)), Scheduled: true, Decision: []string{"a", "b"},
				Clusters: map[string]Presence{"a": running(), "b": {Recorded: true, App: AppLive, Reported: true, LeavingSince: at(0), LeavingForSurplus: true}, "c": running()},
				Intent:   map[string]Intent{"a": included(), "b": included(), "c": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Leaving@0s", "c": "Placed"}, LookAgain: grace - time.Minute},
		},
		"every cluster that qualifies: new ones added, none counted": {
			in: Input{Now: t0, Scheduled: true, Decision: []string{"a", "b", "c"},
				Clusters: map[string]Presence{"a": running(), "z": running()},
				Intent:   map[string]Intent{"a": included(), "b": included(), "c": included(), "z": included()}},
			want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed+added", "c": "Placed+added", "z": "Placed"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.in.GracePeriod == 0 {
				tc.in.GracePeriod = grace
			}
			got := summarizeOutcome(Decide(tc.in))
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
	actual := map[string]IntentKind{}
	for _, c := range clusters {
		actual[c] = []IntentKind{IntentIncluded, IntentIncluded, IntentExcluded}[rng.IntN(3)]
	}
	// excludedSince is when the cluster was first observed not included
	// since it was last observed included (nil: observed included last).
	excludedSince := map[string]*time.Time{}
	status := map[string]Plan{}
	apps := map[string]AppPresence{}
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
				actual[c] = []IntentKind{IntentIncluded, IntentExcluded, IntentGone}[rng.IntN(3)]
			}
		}
		in := Input{Now: now, GracePeriod: grace, Desired: desired, Scheduled: rng.IntN(3) > 0,
			Clusters: map[string]Presence{}, Intent: map[string]Intent{}}
		for _, c := range clusters {
			if rng.IntN(2) == 0 {
				in.Decision = append(in.Decision, c)
			}
			observed := Intent{Kind: actual[c], Reason: "flapped"}
			if rng.IntN(10) == 0 {
				observed = Intent{Kind: IntentUnknown}
			}
			in.Intent[c] = observed
			switch observed.Kind {
			case IntentIncluded:
				excludedSince[c] = nil
			case IntentExcluded, IntentGone:
				if excludedSince[c] == nil {
					excludedSince[c] = ptr.To(now)
				}
			}
		}
		// Things done by hand, and Argo CD's and the agents' lag.
		if rng.IntN(15) == 0 {
			status = map[string]Plan{} // status lost
		}
		for _, c := range clusters {
			if apps[c] == AppLive && rng.IntN(12) == 0 {
				apps[c] = AppNone // deleted by hand, no finalizer
			}
			if apps[c] == AppDeleting && rng.IntN(2) == 0 {
				apps[c] = AppNone
				reported[c] = rng.IntN(3) == 0 // Argo CD may have left it
			}
			p := Presence{App: apps[c], Reported: reported[c]}
			if s, ok := status[c]; ok {
				p.Recorded = true
				switch s.State {
				case Leaving:
					p.LeavingSince = s.Since
				case Removing:
					p.RemovingSince = s.Since
				}
			}
			if apps[c] == AppLive && rng.IntN(8) == 0 {
				p.AppBlocked = "Argo CD reports the Application invalid"
			}
			in.Clusters[c] = p
		}
		copiesBefore := 0
		for _, c := range clusters {
			if in.Clusters[c].Present() {
				copiesBefore++
			}
		}

		out := Decide(in)

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
			if in.Clusters[c].App != AppLive {
				return fail("cluster %s removed without a live Application", c)
			}
			if p := out.Clusters[c]; p.State != Removing {
				return fail("cluster %s removed but recorded %s", c, p.State)
			}
		}
		added := 0
		for c, p := range out.Clusters {
			if !p.Added {
				continue
			}
			added++
			if !in.Scheduled || !slices.Contains(in.Decision, c) || in.Intent[c].Kind != IntentIncluded || in.Clusters[c].Present() {
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
		for _, c := range out.Delivered() {
			if apps[c] == AppNone && rng.IntN(3) > 0 {
				apps[c] = AppLive
				reported[c] = true
			}
		}
		for _, c := range out.Remove {
			apps[c] = AppDeleting
		}
		for _, c := range out.Release {
			apps[c] = AppNone
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
func stored(plans map[string]Plan) map[string]Plan {
	out := make(map[string]Plan, len(plans))
	for c, p := range plans {
		if p.Since != nil {
			p.Since = ptr.To(metav1.NewTime(p.Since.Truncate(time.Second)))
		}
		out[c] = p
	}
	return out
}
