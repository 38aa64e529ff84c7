package hub

// The hub's parallel reconciles and its client's rate limits towards the
// hub API server follow the CPUs the hub gets (GOMAXPROCS: the
// container's CPU limit, or the node's cores without one) unless set.
//
// From make bench, 1,000 clusters: on 2 cores, 8 workers and 200 QPS
// converged 1,000 FleetVMs in 47 to 49 s and never waited on the rate
// limit, 4 and 50 took 63 s (the workers waiting on it 54 % of their busy
// time), and 16 workers took 58 s (the API server, on the same 2 cores,
// answered each write more slowly); on 16 cores, 16 workers and 1,000 QPS
// converged 5,000 in 40.5 s against 48.9 s with 8 and 200. So a worker
// per CPU, 8 at least, and 60 QPS per CPU, 200 at least: the measured
// points. The caps keep one hub on a big node from flooding an API server
// that did not grow with it (API Priority and Fairness queues it anyway).
const (
	minWorkers = 8
	maxWorkers = 32
	qpsPerCPU  = 60
	minQPS     = 200
	maxQPS     = 1000
)

// DefaultWorkers is the number of parallel FleetVirtualMachine reconciles
// for a hub with cpus CPUs.
func DefaultWorkers(cpus int) int { return min(max(cpus, minWorkers), maxWorkers) }

// DefaultQPS is the hub client's queries per second for cpus CPUs.
func DefaultQPS(cpus int) float64 { return float64(min(max(qpsPerCPU*cpus, minQPS), maxQPS)) }

// DefaultBurst is the hub client's burst for a rate of qps: two seconds'
// worth.
func DefaultBurst(qps float64) int { return int(2 * qps) }
