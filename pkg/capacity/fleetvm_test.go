package capacity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

// TestValidScoreValues: a score whose validUntil has come counts as no
// score, at the exact instant too; one second before, and a score without
// validUntil, count as published.
func TestValidScoreValues(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	score := func(validUntil *time.Time) *clusterv1alpha1.AddOnPlacementScore {
		s := &clusterv1alpha1.AddOnPlacementScore{Status: clusterv1alpha1.AddOnPlacementScoreStatus{
			Scores: []clusterv1alpha1.AddOnPlacementScoreItem{{Name: "fit-1000m-1024mi", Value: 3}, {Name: ScoreCPUFree, Value: 7}},
		}}
		if validUntil != nil {
			s.Status.ValidUntil = &metav1.Time{Time: *validUntil}
		}
		return s
	}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	values := map[string]int32{"fit-1000m-1024mi": 3, ScoreCPUFree: 7}
	for name, tc := range map[string]struct {
		score       *clusterv1alpha1.AddOnPlacementScore
		want        map[string]int32
		wantExpired bool
	}{
		"no score":                     {score: nil, want: nil},
		"no validUntil: never expires": {score: score(nil), want: values},
		"valid for one more second":    {score: score(at(time.Second)), want: values},
		"validUntil is now: expired":   {score: score(at(0)), wantExpired: true},
		"expired an hour ago":          {score: score(at(-time.Hour)), wantExpired: true},
		"valid for another hour":       {score: score(at(time.Hour)), want: values},
		"expired one nanosecond ago":   {score: score(at(-time.Nanosecond)), wantExpired: true},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ValidScoreValues(tc.score, now)); diff != "" {
				t.Errorf("ValidScoreValues (-want,+got):\n%s", diff)
			}
			if got := Expired(tc.score, now); got != tc.wantExpired {
				t.Errorf("Expired = %v, want %v", got, tc.wantExpired)
			}
			// ScoreValues, what OCM's scores() sees, ignores validUntil.
			if tc.score != nil {
				if diff := cmp.Diff(values, ScoreValues(tc.score)); diff != "" {
					t.Errorf("ScoreValues (-want,+got):\n%s", diff)
				}
			}
		})
	}
}
