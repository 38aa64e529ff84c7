package fleet

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Row is one figure: what was measured, its value and unit.
type Row struct {
	Scenario string  `json:"scenario"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
}

// Report is the outcome of a run, as saved in JSON.
type Report struct {
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	// Settings the run used.
	Settings Settings `json:"settings"`
	// Machine: CPUs and the load average (1, 5, 15 min) at start and end.
	CPUs             int    `json:"cpus"`
	LoadAverageStart string `json:"loadAverageStart"`
	LoadAverageEnd   string `json:"loadAverageEnd"`
	// Definitions say what the figures mean.
	Definitions []string `json:"definitions"`
	Results     []Row    `json:"results"`
	// Converged is true when every scenario reached its end state.
	Converged bool `json:"converged"`
}

// Settings are the parameters of a run.
type Settings struct {
	Clusters          int      `json:"clusters"`
	FleetVMs          int      `json:"fleetVMs"`
	ClustersPerVM     int      `json:"clustersPerFleetVM"`
	ClientConcurrency int      `json:"clientConcurrency"`
	HubArgs           []string `json:"hubArgs"`
	RestSeconds       float64  `json:"restSeconds"`
	StatusK           []int    `json:"statusK"`
	ArgoRefresh       string   `json:"argoRefresh"`
	// HubBuild is the hub binary's Go version and cgo setting.
	HubBuild string `json:"hubBuild"`
	// HubMemoryLimitMiB is the container limit the hub ran as if under
	// (0: none); it had GOMEMLIMIT set from it.
	HubMemoryLimitMiB int64 `json:"hubMemoryLimitMiB"`
	// NodeFactor multiplies the simulated clusters' 2-4 nodes.
	NodeFactor int `json:"nodeFactor"`
	// Webhooks: the hub served its admission webhooks, and the hub API
	// server called them (false: --disable-webhooks).
	Webhooks bool `json:"webhooks"`
	// CacheConsistencyCheck: the hub API server checked its watch cache
	// against etcd every 5 minutes (false: DetectCacheInconsistency off).
	CacheConsistencyCheck bool `json:"cacheConsistencyCheck"`
}

func (r *Report) add(scenario string, value float64, unit string) {
	r.Results = append(r.Results, Row{Scenario: scenario, Value: value, Unit: unit})
}

func (r *Report) addDuration(scenario string, d time.Duration) {
	r.add(scenario, round(d.Seconds(), 3), "s")
}

// Value returns the value of the row named scenario.
func (r *Report) Value(scenario string) (float64, bool) {
	for _, row := range r.Results {
		if row.Scenario == scenario {
			return row.Value, true
		}
	}
	return 0, false
}

// WriteTable prints the results as an aligned table.
func (r *Report) WriteTable(w io.Writer) error {
	sw, vw := len("scenario"), len("value")
	values := make([]string, len(r.Results))
	for i, row := range r.Results {
		values[i] = formatValue(row.Value)
		sw, vw = max(sw, len(row.Scenario)), max(vw, len(values[i]))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %*s  %s\n", sw, "scenario", vw, "value", "unit")
	fmt.Fprintf(&b, "%s  %s  %s\n", strings.Repeat("-", sw), strings.Repeat("-", vw), "----")
	for i, row := range r.Results {
		fmt.Fprintf(&b, "%-*s  %*s  %s\n", sw, row.Scenario, vw, values[i], row.Unit)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatValue(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

func mib(bytes int64) float64 { return round(float64(bytes)/(1<<20), 1) }

// plural is "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + strings.TrimSuffix(thing, "s") + "s"
}
