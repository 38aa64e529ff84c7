package delivery

import (
	"testing"
	"time"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// TestNextRefresh: Argo CD is asked to refresh only while a listed
// Application is missing and Argo CD reports having set one aside, not
// before refreshAfter, and not more often than refreshEvery.
func TestNextRefresh(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	present := map[string]*argoapp.Application{"prod-a": {}}
	stamp := func(ago time.Duration) string { return now.Add(-ago).Format(time.RFC3339) }
	cases := map[string]struct {
		listed      []string
		since       time.Duration
		last        string
		notSetAside bool
		wantRefresh bool
		wantWait    time.Duration
	}{
		"nothing missing":                       {listed: []string{"prod-a"}, since: time.Hour},
		"missing, one second short":             {listed: []string{"prod-a", "prod-b"}, since: refreshAfter - time.Second, wantWait: time.Second},
		"missing for refreshAfter":              {listed: []string{"prod-a", "prod-b"}, since: refreshAfter, wantRefresh: true, wantWait: refreshEvery},
		"asked 5 s ago":                         {listed: []string{"prod-b"}, since: time.Hour, last: stamp(5 * time.Second), wantWait: refreshEvery - 5*time.Second},
		"asked refreshEvery ago":                {listed: []string{"prod-b"}, since: time.Hour, last: stamp(refreshEvery), wantRefresh: true, wantWait: refreshEvery},
		"unreadable stamp: the first rule only": {listed: []string{"prod-b"}, since: time.Hour, last: "yesterday", wantRefresh: true, wantWait: refreshEvery},
		"missing, Argo CD not there yet":        {listed: []string{"prod-b"}, since: time.Hour, notSetAside: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			refresh, wait := NextRefresh(tc.listed, present, !tc.notSetAside, now.Add(-tc.since), tc.last, now)
			if refresh != tc.wantRefresh || wait != tc.wantWait {
				t.Errorf("refresh %v, wait %s; want %v, %s", refresh, wait, tc.wantRefresh, tc.wantWait)
			}
		})
	}
}

// TestSetAside: only Argo CD's ErrorOccurred condition for an Application
// it could not validate counts.
func TestSetAside(t *testing.T) {
	cond := func(status string, reason string) *argoapp.ApplicationSet {
		return &argoapp.ApplicationSet{Status: argoapp.ApplicationSetStatus{Conditions: []argoapp.ApplicationSetCondition{
			{Type: "ResourcesUpToDate", Status: "False"},
			{Type: argoapp.ApplicationSetConditionErrorOccurred, Status: status, Reason: reason},
		}}}
	}
	cases := map[string]struct {
		appSet *argoapp.ApplicationSet
		want   bool
	}{
		"no status":     {&argoapp.ApplicationSet{}, false},
		"set aside":     {cond(argoapp.ApplicationSetConditionStatusTrue, argoapp.ApplicationSetReasonApplicationValidationError), true},
		"error over":    {cond("False", "ApplicationSetUpToDate"), false},
		"another error": {cond(argoapp.ApplicationSetConditionStatusTrue, "CreateApplicationError"), false},
	}
	for name, tc := range cases {
		if got := SetAside(tc.appSet); got != tc.want {
			t.Errorf("%s: SetAside = %v, want %v", name, got, tc.want)
		}
	}
}
