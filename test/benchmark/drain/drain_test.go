package drain

import (
	"strings"
	"testing"

	"github.com/fleetvm/fleetvm/pkg/controller/drain"
)

// TestCheck: a drain that moved every copy within the limits, with no
// second server, passes; each way one is not safe or not complete is
// named.
func TestCheck(t *testing.T) {
	ok := Result{Copies: 10, Moved: 10, Limits: drain.Limits{PerCluster: 5, PerNode: 2}, MostAtOnce: 5, MostOffOneNode: 2, Unable: map[string]int{}}
	if err := ok.Check(); err != nil {
		t.Errorf("a clean drain: %v", err)
	}
	for name, tc := range map[string]struct {
		change func(*Result)
		want   string
	}{
		"over the cluster's limit": {func(r *Result) { r.MostAtOnce = 6 }, "6 moves at once"},
		"over a node's limit":      {func(r *Result) { r.MostOffOneNode = 3 }, "3 moves off one node"},
		"a second server":          {func(r *Result) { r.SecondServers = []string{"vm-0001"} }, "two servers: [vm-0001]"},
		"a copy not running":       {func(r *Result) { r.LeftRunning = []string{"vm-0002"} }, "not running where their move says: [vm-0002]"},
		"a copy not moved": {func(r *Result) {
			r.Moved = 9
			r.Unable["no cluster has room"] = 1
		}, "9 of 10 copies moved"},
	} {
		r := ok
		r.Unable = map[string]int{}
		tc.change(&r)
		if err := r.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check() = %v, want %q", name, err, tc.want)
		}
		if name == "a copy not moved" && !rowsHave(r.Rows(), "drain: unable: no cluster has room") {
			t.Errorf("the rows do not give the reason a copy did not move: %v", r.Rows())
		}
	}
}

func rowsHave(rows [][3]string, name string) bool {
	for _, r := range rows {
		if r[0] == name {
			return true
		}
	}
	return false
}
