package rollout

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// on: a cluster given and running rev, ready since at.
func on(name string, rev int64, at time.Time) Cluster {
	return Cluster{Name: name, Given: rev, GivenAt: at, Running: rev, Ready: true, ReadySince: at}
}

// given: a cluster given rev at at, its VM still on from.
func given(name string, rev, from int64, at time.Time) Cluster {
	return Cluster{Name: name, Given: rev, GivenAt: at, Running: from, Ready: true, ReadySince: at.Add(-time.Hour)}
}

func progressive(maxConcurrency intstr.IntOrString, cfg clusterv1alpha1.RolloutConfig, mandatory ...clusterv1alpha1.MandatoryDecisionGroup) clusterv1alpha1.RolloutStrategy {
	return clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
		RolloutConfig: cfg, MaxConcurrency: maxConcurrency,
		MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{MandatoryDecisionGroups: mandatory},
	}}
}

func perGroup(cfg clusterv1alpha1.RolloutConfig, mandatory ...clusterv1alpha1.MandatoryDecisionGroup) clusterv1alpha1.RolloutStrategy {
	return clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{
		RolloutConfig:           cfg,
		MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{MandatoryDecisionGroups: mandatory},
	}}
}

func inGroup(c Cluster, name string, index int32) Cluster {
	c.Group = Group{Name: name, Index: index}
	return c
}

func failing(c Cluster, why string) Cluster {
	c.Ready, c.Failure, c.ReadySince = false, why, time.Time{}
	return c
}

// summary is a plan as the tests compare it: the phase and each cluster's
// revision and state.
type summary struct {
	Phase    Phase
	Clusters map[string]string
	Restart  []string
	Recheck  time.Time
}

func summarize(p Plan) summary {
	s := summary{Phase: p.Phase, Clusters: map[string]string{}, Recheck: p.RecheckAt}
	for _, c := range p.Clusters {
		s.Clusters[c.Name] = string(c.State) + "@" + itoa(c.Revision)
		if c.Restart {
			s.Restart = append(s.Restart, c.Name)
		}
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestDecide(t *testing.T) {
	soak := clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: 5 * time.Minute}}
	deadline := clusterv1alpha1.RolloutConfig{ProgressDeadline: "10m"}
	now := t0.Add(time.Hour)
	for name, tc := range map[string]struct {
		in   Input
		want summary
	}{
		"All gives every cluster the revision at once": {
			in: Input{Strategy: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}, Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{on("a", 1, t0), on("b", 1, t0), on("c", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Applying@2", "b": "Applying@2", "c": "Applying@2"}},
		},
		"All succeeds once every cluster runs it ready": {
			in: Input{Strategy: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}, Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{on("a", 2, t0), on("b", 2, t0)}},
			want: summary{Phase: Succeeded, Clusters: map[string]string{"a": "Succeeded@2", "b": "Succeeded@2"}},
		},
		"no cluster decided yet is not a success": {
			in:   Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 1, Now: now},
			want: summary{Phase: Progressing, Clusters: map[string]string{}},
		},
		"All over no cluster is not a success either": {
			in:   Input{Strategy: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}, Target: 2, Previous: 1, Now: now},
			want: summary{Phase: Progressing, Clusters: map[string]string{}},
		},
		"Progressive takes maxConcurrency clusters in name order": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{on("c", 1, t0), on("a", 1, t0), on("b", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Applying@2", "b": "ToApply@1", "c": "ToApply@1"}},
		},
		"Progressive waits for the soak before the next cluster": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{on("a", 2, now.Add(-2*time.Minute)), on("b", 1, t0), on("c", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Soaking@2", "b": "ToApply@1", "c": "ToApply@1"},
				Recheck: now.Add(3 * time.Minute)},
		},
		"Progressive goes on once the soak is over": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{on("a", 2, now.Add(-5*time.Minute)), on("b", 1, t0), on("c", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Succeeded@2", "b": "Applying@2", "c": "ToApply@1"}},
		},
		"a ready cluster without a recorded time has not started its soak": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{{Name: "a", Given: 2, GivenAt: t0, Running: 2, Ready: true}, on("b", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Soaking@2", "b": "ToApply@1"}},
		},
		"Progressive with a percentage rounds up": {
			in: Input{Strategy: progressive(intstr.FromString("34%"), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{on("a", 1, t0), on("b", 1, t0), on("c", 1, t0), on("d", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Applying@2", "b": "Applying@2", "c": "ToApply@1", "d": "ToApply@1"}},
		},
		"a failed cluster frees its place while maxFailures holds": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromInt32(1)}), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{failing(given("a", 2, 2, t0), "CrashLoopBackOff"), on("b", 1, t0), on("c", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Failed@2", "b": "Applying@2", "c": "ToApply@1"}},
		},
		"past maxFailures the rollout stops and the rest keep the previous revision": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{failing(given("a", 2, 2, t0), "ErrorUnschedulable"), on("b", 1, t0), on("c", 1, t0)}},
			want: summary{Phase: Failed, Clusters: map[string]string{"a": "Failed@2", "b": "ToApply@1", "c": "ToApply@1"}},
		},
		"a cluster not ready by progressDeadline times out and counts as failed": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), deadline), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{given("a", 2, 1, now.Add(-10*time.Minute)), on("b", 1, t0)}},
			want: summary{Phase: Failed, Clusters: map[string]string{"a": "TimedOut@2", "b": "ToApply@1"}},
		},
		"ready on the step that finds the deadline passed is a success": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), deadline), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{on("a", 2, now.Add(-10*time.Minute)), on("b", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Succeeded@2", "b": "Applying@2"}},
		},
		"a deadline not passed is a recheck": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), deadline), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{given("a", 2, 1, now.Add(-4*time.Minute)), on("b", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Applying@2", "b": "ToApply@1"}, Recheck: now.Add(6 * time.Minute)},
		},
		"a failed rollout stays failed when the cluster recovers": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now, Failed: true,
				Clusters: []Cluster{on("a", 2, t0), on("b", 1, t0)}},
			want: summary{Phase: Failed, Clusters: map[string]string{"a": "Succeeded@2", "b": "ToApply@1"}},
		},
		"a new copy starts on the target outside maxConcurrency": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{given("a", 2, 1, now), on("b", 1, t0), {Name: "c"}}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Applying@2", "b": "ToApply@1", "c": "Applying@2"}},
		},
		"a new copy of a failed rollout starts on the previous revision": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now, Failed: true,
				Clusters: []Cluster{on("a", 1, t0), {Name: "c"}}},
			want: summary{Phase: Failed, Clusters: map[string]string{"a": "ToApply@1", "c": "ToApply@1"}},
		},
		"paused: those given it go on, no other is given it": {
			in: Input{Strategy: progressive(intstr.FromInt32(2), soak), Target: 2, Previous: 1, Now: now, Paused: true,
				Clusters: []Cluster{given("a", 2, 1, now), on("b", 1, t0), on("c", 1, t0)}},
			want: summary{Phase: Paused, Clusters: map[string]string{"a": "Applying@2", "b": "ToApply@1", "c": "ToApply@1"}},
		},
		"aborted: every cluster given the target gets the previous revision back": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now, Aborted: true,
				Clusters: []Cluster{on("a", 2, t0), given("b", 2, 1, now), on("c", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Reverting@1", "b": "ToApply@1", "c": "ToApply@1"}},
		},
		"aborted and back: rolled back": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now, Aborted: true,
				Clusters: []Cluster{given("a", 2, 1, now), on("c", 1, t0)}},
			want: summary{Phase: RolledBack, Clusters: map[string]string{"a": "ToApply@1", "c": "ToApply@1"}},
		},
		"aborted: a cluster given the previous revision back stays Reverting until its VM runs it ready": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now, Aborted: true,
				Clusters: []Cluster{func() Cluster { c := given("a", 1, 2, now); c.Reverting = true; return c }(), on("c", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Reverting@1", "c": "ToApply@1"}},
		},
		"aborted: a VM that needs a restart to run the previous spec is restarted, not rolled back yet": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now, Aborted: true,
				Clusters: []Cluster{func() Cluster { c := on("a", 1, now); c.Reverting, c.RestartRequired = true, true; return c }(), on("c", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Reverting@1", "c": "ToApply@1"}, Restart: []string{"a"}},
		},
		"aborted: rolled back once the reverted VM runs the previous revision ready": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now, Aborted: true,
				Clusters: []Cluster{func() Cluster { c := on("a", 1, now); c.Reverting = true; return c }(), on("c", 1, t0)}},
			want: summary{Phase: RolledBack, Clusters: map[string]string{"a": "ToApply@1", "c": "ToApply@1"}},
		},
		"a VM that needs a restart to take the revision is restarted in its turn": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{func() Cluster { c := on("a", 2, t0); c.RestartRequired = true; return c }(), func() Cluster { c := on("b", 1, t0); c.RestartRequired = true; return c }()}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Applying@2", "b": "ToApply@1"}, Restart: []string{"a"}},
		},
		"a cluster whose copy is moving waits; the next takes its place": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{func() Cluster { c := on("a", 1, t0); c.Moving = true; return c }(), on("b", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "ToApply@1", "b": "Applying@2"}},
		},
		"mandatory decision groups go first, whole, and tolerate no failure": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromInt32(2)}, clusterv1alpha1.MandatoryDecisionGroup{GroupName: "canary"}), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{inGroup(on("a", 1, t0), "prod", 1), inGroup(on("y", 1, t0), "canary", 0), inGroup(on("z", 1, t0), "canary", 0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "ToApply@1", "y": "Applying@2", "z": "Applying@2"}},
		},
		"a failure in a mandatory group stops the rollout": {
			in: Input{Strategy: progressive(intstr.FromInt32(1), clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromInt32(2)}, clusterv1alpha1.MandatoryDecisionGroup{GroupName: "canary"}), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{inGroup(on("a", 1, t0), "prod", 1), inGroup(failing(given("y", 2, 2, t0), "CrashLoopBackOff"), "canary", 0)}},
			want: summary{Phase: Failed, Clusters: map[string]string{"a": "ToApply@1", "y": "Failed@2"}},
		},
		"ProgressivePerGroup gives a group whole, the next once it is done": {
			in: Input{Strategy: perGroup(soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{inGroup(on("a", 2, now), "g0", 0), inGroup(on("b", 1, t0), "g0", 0), inGroup(on("c", 1, t0), "g1", 1)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Soaking@2", "b": "Applying@2", "c": "ToApply@1"}, Recheck: now.Add(5 * time.Minute)},
		},
		"ProgressivePerGroup counts maxFailures per group": {
			in: Input{Strategy: perGroup(clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromString("50%")}), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{inGroup(failing(given("a", 2, 2, t0), "CrashLoopBackOff"), "g0", 0), inGroup(on("b", 2, t0), "g0", 0), inGroup(on("c", 1, t0), "g1", 1)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Failed@2", "b": "Succeeded@2", "c": "Applying@2"}},
		},
		"a hub restarted mid-wave plans the same from the status": {
			in: Input{Strategy: progressive(intstr.FromInt32(2), soak), Target: 2, Previous: 1, Now: now,
				Clusters: []Cluster{given("a", 2, 1, now.Add(-time.Minute)), on("b", 2, now.Add(-time.Minute)), on("c", 1, t0)}},
			want: summary{Phase: Progressing, Clusters: map[string]string{"a": "Applying@2", "b": "Soaking@2", "c": "ToApply@1"},
				Recheck: now.Add(4 * time.Minute)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			plan := Decide(tc.in)
			if diff := cmp.Diff(tc.want, summarize(plan)); diff != "" {
				t.Errorf("Decide (-want,+got):\n%s", diff)
			}
			// A rollout over no cluster says why it is not done; one over
			// clusters never says there are none.
			if none := len(tc.in.Clusters) == 0; (plan.Message == noCluster) != (none && plan.Phase == Progressing) {
				t.Errorf("Decide message %q over %d clusters, phase %s", plan.Message, len(tc.in.Clusters), plan.Phase)
			}
		})
	}
}

// TestDecideNeverExceedsMaxConcurrency: whatever the clusters report, a
// Progressive plan never has more clusters in flight than maxConcurrency
// beyond those already in flight and the new copies.
func TestDecideNeverExceedsMaxConcurrency(t *testing.T) {
	now := t0.Add(time.Hour)
	states := []func(name string) Cluster{
		func(n string) Cluster { return on(n, 1, t0) },
		func(n string) Cluster { return given(n, 2, 1, now) },
		func(n string) Cluster { return on(n, 2, now) },
		func(n string) Cluster { return on(n, 2, t0) },
	}
	names := []string{"a", "b", "c", "d"}
	for limit := int32(1); limit <= 3; limit++ {
		var walk func(i int, cs []Cluster)
		walk = func(i int, cs []Cluster) {
			if i == len(names) {
				in := Input{Strategy: progressive(intstr.FromInt32(limit), clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: time.Minute}}),
					Target: 2, Previous: 1, Now: now, Clusters: cs}
				before := 0
				for _, c := range cs {
					if c.Given == 2 && (c.Running != 2 || !c.Ready || now.Before(c.ReadySince.Add(time.Minute))) {
						before++
					}
				}
				inFlight := 0
				for _, p := range Decide(in).Clusters {
					if p.State.inFlight() {
						inFlight++
					}
				}
				if inFlight > max(before, int(limit)) {
					t.Errorf("maxConcurrency %d, %d in flight before: %d after, clusters %+v", limit, before, inFlight, cs)
				}
				return
			}
			for _, s := range states {
				walk(i+1, append(cs[:i:i], s(names[i])))
			}
		}
		walk(0, nil)
	}
}
