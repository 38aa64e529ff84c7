// Package metrics exposes the state of the fleet as Prometheus metrics on
// fleetvm-hub's metrics endpoint (controller-runtime's registry).
//
// The collector reads the manager's cache when Prometheus scrapes: no
// extra API calls, no state kept between scrapes, nothing to go stale.
// Cardinality is bounded by the objects, never by time or by free text:
//   - per namespace: 5 conditions x 3 statuses;
//   - per FleetVirtualMachine: two (desired, ready) plus one per cluster
//     phase its clusters are in (one, when all run);
//   - per FleetDiskImage: one series per image phase (5) plus one per
//     cluster the image is on.
//
// Reconcile counts, errors and latency come from controller-runtime itself
// (controller_runtime_reconcile_total{controller,result} and the rest).
package metrics

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// The collector reads what the hub caches.
// The secured metrics endpoint authenticates tokens and authorizes users:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines;fleetdiskimages,verbs=get;list;watch

// DefaultTimeout bounds the cache reads of one scrape, well within
// Prometheus' default 10s scrape timeout.
const DefaultTimeout = 5 * time.Second

const (
	kindFVM = "FleetVirtualMachine"
	kindFDI = "FleetDiskImage"
)

// conditionTypes are the FleetVirtualMachine conditions counted.
var conditionTypes = []string{
	fleetv1alpha1.ConditionReady,
	fleetv1alpha1.ConditionPlaced,
	fleetv1alpha1.ConditionDelivered,
	fleetv1alpha1.ConditionAvailable,
	fleetv1alpha1.ConditionDegraded,
}

var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// clusterPhases are every ClusterPhase, in the order series are made. A
// FleetVirtualMachine has a series only for the phases its clusters are
// in: a zero for each of the other ten would be 10 series per
// FleetVirtualMachine that say nothing (100,000 at 10,000 FleetVMs, each
// scrape encoding them), and `fleetvm_fleetvirtualmachine_clusters_desired`
// and `_ready`, always there, are what an alert on missing copies reads.
var clusterPhases = []fleetv1alpha1.ClusterPhase{
	fleetv1alpha1.ClusterPhasePending,
	fleetv1alpha1.ClusterPhaseWaitingForImage,
	fleetv1alpha1.ClusterPhaseProvisioning,
	fleetv1alpha1.ClusterPhaseStarting,
	fleetv1alpha1.ClusterPhaseRunning,
	fleetv1alpha1.ClusterPhaseStopping,
	fleetv1alpha1.ClusterPhaseStopped,
	fleetv1alpha1.ClusterPhaseFailed,
	fleetv1alpha1.ClusterPhaseLeaving,
	fleetv1alpha1.ClusterPhaseRemoving,
	fleetv1alpha1.ClusterPhaseUnknown,
}

var imagePhases = []fleetv1alpha1.ImagePhase{
	fleetv1alpha1.ImagePhasePending,
	fleetv1alpha1.ImagePhaseImporting,
	fleetv1alpha1.ImagePhaseReady,
	fleetv1alpha1.ImagePhaseFailed,
	fleetv1alpha1.ImagePhasePruning,
}

var (
	fleetVMsDesc = prometheus.NewDesc("fleetvm_fleetvirtualmachines",
		"FleetVirtualMachines by namespace and by the status of each condition (Ready, Placed, Delivered, Available, Degraded); a missing condition counts as Unknown.",
		[]string{"namespace", "condition", "status"}, nil)
	clustersDesc = prometheus.NewDesc("fleetvm_fleetvirtualmachine_clusters",
		"Clusters of a FleetVirtualMachine by the phase of the VM there (status.clusters); only phases with at least one cluster have a series.",
		[]string{"namespace", "name", "phase"}, nil)
	desiredDesc = prometheus.NewDesc("fleetvm_fleetvirtualmachine_clusters_desired",
		"Clusters a FleetVirtualMachine asks for (status.summary.desired).",
		[]string{"namespace", "name"}, nil)
	readyDesc = prometheus.NewDesc("fleetvm_fleetvirtualmachine_clusters_ready",
		"Clusters where a FleetVirtualMachine's VM is running and ready (status.summary.ready).",
		[]string{"namespace", "name"}, nil)
	imageRefsDesc = prometheus.NewDesc("fleetvm_diskimage_references",
		"VMs on a cluster, fleet-managed or not, that use a FleetDiskImage (status.clusters[].references).",
		[]string{"namespace", "image", "cluster"}, nil)
	imageClustersDesc = prometheus.NewDesc("fleetvm_diskimage_clusters",
		"Clusters a FleetDiskImage is on, by the image's phase there.",
		[]string{"namespace", "image", "phase"}, nil)
)

// Collector is a prometheus.Collector over the FleetVM objects a
// client.Reader (the manager's cache) holds.
type Collector struct {
	reader  client.Reader
	log     logr.Logger
	timeout time.Duration
	// listErrors counts scrapes whose read of a kind failed; that kind's
	// series are left out of the scrape, the rest still served.
	listErrors *prometheus.CounterVec
}

// NewCollector returns a collector reading from reader.
func NewCollector(reader client.Reader, log logr.Logger) *Collector {
	c := &Collector{
		reader:  reader,
		log:     log,
		timeout: DefaultTimeout,
		listErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetvm_metrics_list_errors_total",
			Help: "Scrapes in which reading a kind from the hub's cache failed; that kind's fleetvm_ series were left out.",
		}, []string{"kind"}),
	}
	// Both series exist from the start, so increase() sees the first error.
	c.listErrors.WithLabelValues(kindFVM)
	c.listErrors.WithLabelValues(kindFDI)
	return c
}

// Register adds the FleetVM collector to controller-runtime's metrics
// registry, served on fleetvm-hub's metrics endpoint. reader is the
// manager's cache.
func Register(reader client.Reader) error {
	return ctrlmetrics.Registry.Register(NewCollector(reader, ctrl.Log.WithName("metrics")))
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fleetVMsDesc, clustersDesc, desiredDesc, readyDesc, imageRefsDesc, imageClustersDesc} {
		ch <- d
	}
	c.listErrors.Describe(ch)
}

// Collect implements prometheus.Collector. A kind that cannot be read is
// left out and counted, so one failure never fails the whole scrape (the
// endpoint answers 500 on any collector error, controller-runtime's
// metrics included).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()

	fvms := &fleetv1alpha1.FleetVirtualMachineList{}
	if err := c.reader.List(ctx, fvms, client.UnsafeDisableDeepCopy); err != nil {
		c.failed(kindFVM, err)
	} else {
		collectFleetVMs(ch, fvms.Items)
	}

	fdis := &fleetv1alpha1.FleetDiskImageList{}
	if err := c.reader.List(ctx, fdis, client.UnsafeDisableDeepCopy); err != nil {
		c.failed(kindFDI, err)
	} else {
		collectImages(ch, fdis.Items)
	}
	c.listErrors.Collect(ch)
}

func (c *Collector) failed(kind string, err error) {
	c.listErrors.WithLabelValues(kind).Inc()
	c.log.Error(err, "cannot read from the cache; its series are left out of this scrape", "kind", kind)
}

func collectFleetVMs(ch chan<- prometheus.Metric, items []fleetv1alpha1.FleetVirtualMachine) {
	type key struct{ namespace, condition, status string }
	counts := map[key]int{}
	namespaces := map[string]bool{}
	for i := range items {
		fvm := &items[i]
		namespaces[fvm.Namespace] = true
		for _, t := range conditionTypes {
			counts[key{fvm.Namespace, t, string(conditionStatus(fvm.Status.Conditions, t))}]++
		}

		phases := map[fleetv1alpha1.ClusterPhase]int{}
		for _, cs := range fvm.Status.Clusters {
			phases[knownPhase(cs.Phase)]++
		}
		for _, p := range clusterPhases {
			if phases[p] > 0 {
				ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, float64(phases[p]), fvm.Namespace, fvm.Name, string(p))
			}
		}
		ch <- prometheus.MustNewConstMetric(desiredDesc, prometheus.GaugeValue, float64(fvm.Status.Summary.Desired), fvm.Namespace, fvm.Name)
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, float64(fvm.Status.Summary.Ready), fvm.Namespace, fvm.Name)
	}
	for ns := range namespaces {
		for _, t := range conditionTypes {
			for _, s := range conditionStatuses {
				ch <- prometheus.MustNewConstMetric(fleetVMsDesc, prometheus.GaugeValue, float64(counts[key{ns, t, string(s)}]), ns, t, string(s))
			}
		}
	}
}

func collectImages(ch chan<- prometheus.Metric, items []fleetv1alpha1.FleetDiskImage) {
	for i := range items {
		img := &items[i]
		phases := map[fleetv1alpha1.ImagePhase]int{}
		seen := map[string]bool{}
		for _, cs := range img.Status.Clusters {
			phases[knownImagePhase(cs.Phase)]++
			if seen[cs.Cluster] { // a list map: one entry per cluster, but never emit a duplicate series
				continue
			}
			seen[cs.Cluster] = true
			ch <- prometheus.MustNewConstMetric(imageRefsDesc, prometheus.GaugeValue, float64(cs.References), img.Namespace, img.Name, cs.Cluster)
		}
		for _, p := range imagePhases {
			ch <- prometheus.MustNewConstMetric(imageClustersDesc, prometheus.GaugeValue, float64(phases[p]), img.Namespace, img.Name, string(p))
		}
	}
}

// conditionStatus is the condition's status; Unknown when it is missing
// or holds something else.
func conditionStatus(conditions []metav1.Condition, t string) metav1.ConditionStatus {
	for _, c := range conditions {
		if c.Type == t && (c.Status == metav1.ConditionTrue || c.Status == metav1.ConditionFalse) {
			return c.Status
		}
	}
	return metav1.ConditionUnknown
}

// knownPhase keeps the phase label within the enum: anything else (an
// entry without phase) counts as Unknown.
func knownPhase(p fleetv1alpha1.ClusterPhase) fleetv1alpha1.ClusterPhase {
	for _, k := range clusterPhases {
		if p == k {
			return p
		}
	}
	return fleetv1alpha1.ClusterPhaseUnknown
}

// knownImagePhase keeps the phase label within the enum: an entry without
// phase counts as Pending.
func knownImagePhase(p fleetv1alpha1.ImagePhase) fleetv1alpha1.ImagePhase {
	for _, k := range imagePhases {
		if p == k {
			return p
		}
	}
	return fleetv1alpha1.ImagePhasePending
}
