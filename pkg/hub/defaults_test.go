package hub

import "testing"

// TestDefaultsFollowTheCPUs: the measured points (2 and 16 cores) and the
// bounds on either side.
func TestDefaultsFollowTheCPUs(t *testing.T) {
	for _, tc := range []struct {
		cpus, workers int
		qps           float64
		burst         int
	}{
		{cpus: 1, workers: 8, qps: 200, burst: 400},
		{cpus: 2, workers: 8, qps: 200, burst: 400},
		{cpus: 4, workers: 8, qps: 240, burst: 480},
		{cpus: 16, workers: 16, qps: 960, burst: 1920},
		{cpus: 64, workers: 32, qps: 1000, burst: 2000},
	} {
		w, q := DefaultWorkers(tc.cpus), DefaultQPS(tc.cpus)
		if w != tc.workers || q != tc.qps || DefaultBurst(q) != tc.burst {
			t.Errorf("%d CPUs: %d workers, %v QPS, burst %d; want %d, %v, %d", tc.cpus, w, q, DefaultBurst(q), tc.workers, tc.qps, tc.burst)
		}
	}
}
