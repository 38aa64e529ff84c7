package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// The CPU split says where the machine's cores go during the burst: the
// hub API server and etcd (the harness's children), fleetvm-hub, the
// harness itself (the OCM scheduler and the agent and Argo CD stand-ins)
// and everything else. When the machine is busy, a burst is bound by the
// sum, not by any one process's waits.

// cpuSplit is CPU time per part of the benchmark, and the machine's.
type cpuSplit struct {
	parts map[string]time.Duration
	// busy and total are the machine's busy and total CPU time
	// (/proc/stat, every core).
	busy, total time.Duration
}

// The parts, by process.
const (
	partAPIServer = "kube-apiserver"
	partEtcd      = "etcd"
	partHub       = "fleetvm-hub"
	partHarness   = "harness (OCM scheduler, agent and Argo CD stand-ins)"
)

// readCPUSplit reads the CPU time of the harness, its children that are
// the hub API server and etcd, and fleetvm-hub (hubPID), and the
// machine's.
func readCPUSplit(hubPID int) cpuSplit {
	s := cpuSplit{parts: map[string]time.Duration{}}
	self := os.Getpid()
	if st, err := readProc(self); err == nil {
		s.parts[partHarness] = st.CPU
	}
	if st, err := readProc(hubPID); err == nil {
		s.parts[partHub] = st.CPU
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, ppid, ok := procParent(pid)
		if !ok || ppid != self {
			continue
		}
		part := ""
		switch comm {
		case "kube-apiserver":
			part = partAPIServer
		case "etcd":
			part = partEtcd
		default:
			continue
		}
		if st, err := readProc(pid); err == nil {
			s.parts[part] += st.CPU
		}
	}
	s.busy, s.total = machineCPU()
	return s
}

// procParent reads a process's command name and parent.
func procParent(pid int) (string, int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return s[open+1 : closing], ppid, err == nil
}

// machineCPU is the busy and total CPU time of every core (/proc/stat's
// first line; idle and iowait are not busy).
func machineCPU() (busy, total time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	var sum, idle int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest times are already counted in user
			break
		}
		sum += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	tick := time.Second / clockTicks
	return time.Duration(sum-idle) * tick, time.Duration(sum) * tick
}

// addCPURows adds the split between before and after to the report.
func addCPURows(r *Report, label string, before, after cpuSplit) {
	total := after.total - before.total
	if total <= 0 {
		return
	}
	r.add(label+": machine CPU busy", round(100*float64(after.busy-before.busy)/float64(total), 1), "%")
	var known time.Duration
	for _, p := range []string{partAPIServer, partEtcd, partHub, partHarness} {
		d := after.parts[p] - before.parts[p]
		known += d
		r.addDuration(label+": CPU time, "+p, d)
	}
	r.addDuration(label+": CPU time, everything else on the machine", max(0, after.busy-before.busy-known))
}

// cpuProfiles fetches CPU profiles of the hub API server and of
// fleetvm-hub over the same window, in the background, and saves them
// under prefix; the returned function waits for both.
func (h *harness) cpuProfiles(ctx context.Context, prefix string, window time.Duration) func() {
	seconds := strconv.Itoa(int(window.Seconds()))
	done := make(chan struct{}, 2)
	save := func(name string, fetch func() (io.ReadCloser, error)) {
		defer func() { done <- struct{}{} }()
		body, err := fetch()
		if err == nil {
			var f *os.File
			if f, err = os.Create(prefix + "-" + name + "-cpu.pprof"); err == nil {
				_, err = io.Copy(f, body)
				err = errors.Join(err, f.Close())
			}
			_ = body.Close()
		}
		if err != nil {
			h.logf("CPU profile of %s: %v", name, err)
			return
		}
		h.logf("CPU profile of %s over %ss: %s", name, seconds, filepath.Base(prefix)+"-"+name+"-cpu.pprof")
	}
	go save("apiserver", func() (io.ReadCloser, error) {
		return h.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", seconds).Timeout(window + time.Minute).Stream(ctx)
	})
	go save("hub", func() (io.ReadCloser, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.hub.pprofURL+"profile?seconds="+seconds, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			_ = resp.Body.Close()
			return nil, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
		}
		return resp.Body, nil
	})
	return func() { <-done; <-done }
}

// apiWrites counts every client's writes the hub API server answered,
// by resource (with its subresource), from apiserver_request_total.
func apiWrites(ctx context.Context, kube kubernetes.Interface) (map[string]float64, error) {
	ss, err := scrapeAPIServer(ctx, kube)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range ss {
		if s.name != "apiserver_request_total" {
			continue
		}
		switch s.labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		res := s.labels["resource"]
		if sub := s.labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[res] += s.value
	}
	return out, nil
}

// addWriteRows adds everyone's writes per FleetVM between before and
// after, by resource, largest first; resources under 0.05 per FleetVM
// are summed as "other".
func addWriteRows(r *Report, label string, before, after map[string]float64, fleetVMs int) {
	if fleetVMs <= 0 || after == nil {
		return
	}
	type row struct {
		res string
		n   float64
	}
	var rows []row
	var total, other float64
	for res, n := range after {
		d := n - before[res]
		total += d
		if d/float64(fleetVMs) < 0.05 {
			other += d
			continue
		}
		rows = append(rows, row{res, d})
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.n, a.n) })
	per := func(n float64) float64 { return round(n/float64(fleetVMs), 2) }
	r.add(label+": API server writes per FleetVM, every client", per(total), "writes/FleetVM")
	for _, w := range rows {
		r.add(label+": API server writes per FleetVM, every client: "+w.res, per(w.n), "writes/FleetVM")
	}
	r.add(label+": API server writes per FleetVM, every client: other", per(other), "writes/FleetVM")
}
