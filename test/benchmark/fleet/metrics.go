package fleet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// samples is a parsed scrape.
type samples []sample

// parseMetrics reads the Prometheus text exposition format: comments are
// skipped, every other line is name{labels} value [timestamp].
func parseMetrics(r io.Reader) (samples, error) {
	var out samples
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	rest := line
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("metrics line %q: no value", line)
	}
	s.name, rest = line[:i], line[i:]
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, fmt.Errorf("metrics line %q: bad labels", line)
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[i])
					}
					continue
				}
				if c == '"' {
					rest = rest[i+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("metrics line %q: unterminated label value", line)
			}
			s.labels[key] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("metrics line %q: no value", line)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("metrics line %q: %w", line, err)
	}
	s.value = v
	return s, nil
}

// sum adds the values of the samples called name whose labels include
// match.
func (ss samples) sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.value
		}
	}
	return total
}

// scrapeAPIServer reads the hub API server's own /metrics (the admin may).
func scrapeAPIServer(ctx context.Context, kube kubernetes.Interface) (samples, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	return parseMetrics(bytes.NewReader(raw))
}

// scrapeHTTP reads a plain-HTTP metrics endpoint (fleetvm-hub's).
func scrapeHTTP(ctx context.Context, url string) (samples, error) {
	raw, err := fetchHTTP(ctx, url)
	if err != nil {
		return nil, err
	}
	return parseMetrics(bytes.NewReader(raw))
}

// fetchHTTP reads a plain-HTTP metrics endpoint as it serves it.
func fetchHTTP(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// schedulerStats are the OCM placement scheduler's own counters: it runs
// in this process and registers its histograms in the Kubernetes legacy
// registry.
type schedulerStats struct {
	// Runs is the number of placement schedulings; Busy the time spent
	// scheduling and binding (writing decisions), summed.
	Runs float64
	Busy time.Duration
	// Parts splits the time by where OCM's histograms say it went: each
	// filter and prioritizer plugin ("filter Predicate"), the CEL
	// evaluations inside the Predicate filter ("CEL evaluation", without
	// building the CEL environment and converting each cluster), and
	// writing the decisions ("bind").
	Parts map[string]time.Duration
}

// CEL evaluation is part of the Predicate filter's time, not beside it.
const celPart = "CEL evaluation"

func readSchedulerStats() (schedulerStats, error) {
	rec := httptest.NewRecorder()
	legacyregistry.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	ss, err := parseMetrics(rec.Body)
	if err != nil {
		return schedulerStats{}, err
	}
	seconds := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	bind := ss.sum("scheduling_bind_duration_seconds_sum", nil)
	parts := map[string]time.Duration{
		"bind":  seconds(bind),
		celPart: seconds(ss.sum("scheduling_cel_runtime_duration_seconds_sum", nil)),
	}
	for _, s := range ss {
		if s.name == "scheduling_plugin_duration_seconds_sum" {
			parts[s.labels["plugin_type"]+" "+s.labels["plugin_name"]] += seconds(s.value)
		}
	}
	return schedulerStats{
		Runs:  ss.sum("scheduling_scheduling_duration_seconds_count", nil),
		Busy:  seconds(ss.sum("scheduling_scheduling_duration_seconds_sum", nil) + bind),
		Parts: parts,
	}, nil
}

func (s schedulerStats) sub(before schedulerStats) schedulerStats {
	parts := make(map[string]time.Duration, len(s.Parts))
	for k, v := range s.Parts {
		parts[k] = v - before.Parts[k]
	}
	return schedulerStats{Runs: s.Runs - before.Runs, Busy: s.Busy - before.Busy, Parts: parts}
}

// perRun reports the scheduler's time per run, and where it went.
func (r *Report) schedulerPerRun(label string, d schedulerStats) {
	if d.Runs <= 0 {
		return
	}
	ms := func(t time.Duration) float64 { return round(float64(t.Microseconds())/1000/d.Runs, 1) }
	r.add(label+": OCM scheduler time per run", ms(d.Busy), "ms")
	names := make([]string, 0, len(d.Parts))
	for k := range d.Parts {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		r.add(label+": OCM scheduler time per run: "+k, ms(d.Parts[k]), "ms")
	}
}

// procStats is what the kernel says of a process.
type procStats struct {
	// RSS and HWM (peak RSS) in bytes, from /proc/<pid>/status, and
	// RSSFile, the part of RSS that maps files (the binary's code and
	// read-only data), which no heap setting changes.
	RSS, HWM, RSSFile int64
	// CPU is user + system time, from /proc/<pid>/stat.
	CPU time.Duration
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// readProc reads a process's memory and CPU time.
func readProc(pid int) (procStats, error) {
	var st procStats
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) < 1 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			st.RSS = kb << 10
		case "VmHWM":
			st.HWM = kb << 10
		case "RssFile":
			st.RSSFile = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// The command name is in parentheses and may hold spaces: fields
	// are counted after the last ')'. utime and stime are fields 14, 15.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 13 {
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			stt, _ := strconv.ParseInt(f[12], 10, 64)
			st.CPU = time.Duration(ut+stt) * time.Second / clockTicks
		}
	}
	return st, nil
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
