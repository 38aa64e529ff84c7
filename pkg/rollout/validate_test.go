package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

func TestValidate(t *testing.T) {
	one := intstr.FromInt32(1)
	for name, tc := range map[string]struct {
		s clusterv1alpha1.RolloutStrategy
		// want is each error's field and a word of its reason; none when
		// empty.
		want map[string]string
	}{
		"All, nothing else":       {s: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}},
		"empty type reads as All": {s: clusterv1alpha1.RolloutStrategy{}},
		"All with a deadline":     {s: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "30m"}}}},
		"Progressive, complete": {s: progressive(intstr.FromString("25%"), clusterv1alpha1.RolloutConfig{
			MinSuccessTime: metav1.Duration{Duration: time.Minute}, ProgressDeadline: "1h30m", MaxFailures: intstr.FromString("10%"),
		}, clusterv1alpha1.MandatoryDecisionGroup{GroupName: "canary"}, clusterv1alpha1.MandatoryDecisionGroup{GroupIndex: 1})},
		"ProgressivePerGroup, no block": {s: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup}},
		"ProgressivePerGroup with None": {s: perGroup(clusterv1alpha1.RolloutConfig{ProgressDeadline: "None", MaxFailures: intstr.FromInt32(3)})},

		"an unknown type": {s: clusterv1alpha1.RolloutStrategy{Type: "Canary"},
			want: map[string]string{"rollout.type": "Unsupported"}},
		"a block of another type": {s: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: one}},
			want: map[string]string{"rollout.progressive": "only read with type Progressive"}},
		"All with a soak": {s: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{RolloutConfig: clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: time.Minute}}}},
			want: map[string]string{"rollout.all.minSuccessTime": "not read with type All"}},
		"All with maxFailures": {s: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{RolloutConfig: clusterv1alpha1.RolloutConfig{MaxFailures: one}}},
			want: map[string]string{"rollout.all.maxFailures": "not read with type All"}},
		"Progressive without a block": {s: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive},
			want: map[string]string{"rollout.progressive.maxConcurrency": "every cluster at once"}},
		"Progressive with maxConcurrency 0": {s: progressive(intstr.FromInt32(0), clusterv1alpha1.RolloutConfig{}),
			want: map[string]string{"rollout.progressive.maxConcurrency": "at least 1"}},
		"Progressive with maxConcurrency 0%": {s: progressive(intstr.FromString("0%"), clusterv1alpha1.RolloutConfig{}),
			want: map[string]string{"rollout.progressive.maxConcurrency": "at least 1%"}},
		"Progressive with maxConcurrency 150%": {s: progressive(intstr.FromString("150%"), clusterv1alpha1.RolloutConfig{}),
			want: map[string]string{"rollout.progressive.maxConcurrency": "whole percentage up to 100%"}},
		"Progressive with maxConcurrency 2.5%": {s: progressive(intstr.FromString("2.5%"), clusterv1alpha1.RolloutConfig{}),
			want: map[string]string{"rollout.progressive.maxConcurrency": "whole percentage"}},
		"Progressive with maxConcurrency three": {s: progressive(intstr.FromString("three"), clusterv1alpha1.RolloutConfig{}),
			want: map[string]string{"rollout.progressive.maxConcurrency": "count or a whole percentage"}},
		"a negative maxFailures": {s: progressive(one, clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromInt32(-1)}),
			want: map[string]string{"rollout.progressive.maxFailures": "at least 0"}},
		"a deadline of 0s": {s: progressive(one, clusterv1alpha1.RolloutConfig{ProgressDeadline: "0s"}),
			want: map[string]string{"rollout.progressive.progressDeadline": "longer than 0s"}},
		"a deadline in milliseconds": {s: progressive(one, clusterv1alpha1.RolloutConfig{ProgressDeadline: "1500ms"}),
			want: map[string]string{"rollout.progressive.progressDeadline": "hours, minutes and seconds"}},
		"a deadline OCM's pattern lets through": {s: perGroup(clusterv1alpha1.RolloutConfig{ProgressDeadline: "5mfoo"}),
			want: map[string]string{"rollout.progressivePerGroup.progressDeadline": "hours, minutes and seconds"}},
		"a negative soak": {s: perGroup(clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: -time.Second}}),
			want: map[string]string{"rollout.progressivePerGroup.minSuccessTime": "negative"}},
		"a mandatory group named twice": {s: perGroup(clusterv1alpha1.RolloutConfig{}, clusterv1alpha1.MandatoryDecisionGroup{GroupName: "canary"}, clusterv1alpha1.MandatoryDecisionGroup{GroupName: "canary"}),
			want: map[string]string{"rollout.progressivePerGroup.mandatoryDecisionGroups[1]": "Duplicate"}},
	} {
		t.Run(name, func(t *testing.T) {
			errs := Validate(&tc.s, field.NewPath("rollout"))
			got := map[string]string{}
			for _, e := range errs {
				got[e.Field] = e.Error()
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors %v, want on %v", errs, tc.want)
			}
			for f, word := range tc.want {
				if !strings.Contains(got[f], word) {
					t.Errorf("error on %s = %q, want it to say %q", f, got[f], word)
				}
			}
		})
	}
}
