// Package metrics exposes the state of the fleet as Prometheus metrics on
// fleetvm-hub's metrics endpoint (controller-runtime's registry).
//
// The collector reads the manager's cache when Prometheus scrapes: no
// extra API calls, no state kept between scrapes, nothing to go stale.
// Cardinality is bounded by the objects, never by time or by free text:
//   - per namespace: 5 conditions x 3 statuses;
//   - per FleetVirtualMachine: two (desired, ready) plus one per cluster
//     phase its clusters are in (one, when all run);
//   - per FleetDiskImage: one series per image phase (5), its retention,
//     plus one per cluster the image is on and one more per cluster where
//     it sits unused;
//   - per managed cluster: one per phase its FleetVM copies are in, the
//     agent's last heartbeat, and two more while it drains;
//   - per namespace: one per reason that keeps clusters off its
//     FleetVirtualMachines;
//   - per FleetVirtualMachineMove: its phase, and its deadline until it
//     ends (ended moves are removed after their TTL).
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
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetdiskimage"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
)

// The collector reads what the hub caches.
// The secured metrics endpoint authenticates tokens and authorizes users:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines;fleetdiskimages;fleetvirtualmachinemoves;imageinventories,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch

// DefaultTimeout bounds the cache reads of one scrape, well within
// Prometheus' default 10s scrape timeout.
const DefaultTimeout = 5 * time.Second

const (
	kindFVM       = "FleetVirtualMachine"
	kindFDI       = "FleetDiskImage"
	kindMove      = "FleetVirtualMachineMove"
	kindInventory = "ImageInventory"
	kindCluster   = "ManagedCluster"
)

// kinds are the kinds read per scrape, each counted apart when it fails.
var kinds = []string{kindFVM, kindFDI, kindMove, kindInventory, kindCluster}

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
	imageUnusedDesc = prometheus.NewDesc("fleetvm_diskimage_unused_since_timestamp_seconds",
		"When a FleetDiskImage was first seen unused on a cluster after its last use (status.clusters[].lastReferencedTime); only while it is unused there.",
		[]string{"namespace", "image", "cluster"}, nil)
	imageRetentionDesc = prometheus.NewDesc("fleetvm_diskimage_retention_seconds",
		"How long a FleetDiskImage may sit unused on a cluster before it is pruned there (spec.retention).",
		[]string{"namespace", "image"}, nil)
	clusterCopiesDesc = prometheus.NewDesc("fleetvm_cluster_copies",
		"FleetVirtualMachine copies on a managed cluster by environment and phase (every FleetVirtualMachine's status.clusters); only phases with a copy have a series.",
		[]string{"cluster", "environment", "phase"}, nil)
	exclusionsDesc = prometheus.NewDesc("fleetvm_placement_exclusions",
		"Clusters kept off a namespace's FleetVirtualMachines, summed over them, by the first reason (status.placement.excluded).",
		[]string{"namespace", "reason"}, nil)
	movePhaseDesc = prometheus.NewDesc("fleetvm_move_phase",
		"1 for each FleetVirtualMachineMove, labelled with its current phase and method.",
		[]string{"namespace", "name", "fleetvirtualmachine", "method", "phase"}, nil)
	moveDeadlineDesc = prometheus.NewDesc("fleetvm_move_deadline_timestamp_seconds",
		"When a FleetVirtualMachineMove that has not ended passes its timeout: from its start, or from when it began waiting while Pending.",
		[]string{"namespace", "name"}, nil)
	drainCopiesDesc = prometheus.NewDesc("fleetvm_drain_copies",
		"FleetVirtualMachine copies still on a cluster that carries the drain taint (fleetvm.io/drain).",
		[]string{"cluster"}, nil)
	drainProgressDesc = prometheus.NewDesc("fleetvm_drain_last_progress_timestamp_seconds",
		"When a draining cluster's drain last moved on: the drain taint's timeAdded, or the latest start or end of a move its drain made, whichever is later.",
		[]string{"cluster"}, nil)
	agentInventoryDesc = prometheus.NewDesc("fleetvm_agent_inventory_timestamp_seconds",
		"When a managed cluster's fleetvm agent last confirmed its image inventory (ImageInventory spec.observedTime): the agent's heartbeat, refreshed every few minutes even when nothing changed.",
		[]string{"cluster"}, nil)
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
	// Every kind's series exists from the start, so increase() sees the
	// first error.
	for _, k := range kinds {
		c.listErrors.WithLabelValues(k)
	}
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
	for _, d := range []*prometheus.Desc{
		fleetVMsDesc, clustersDesc, desiredDesc, readyDesc, imageRefsDesc, imageClustersDesc, imageUnusedDesc, imageRetentionDesc,
		clusterCopiesDesc, exclusionsDesc, movePhaseDesc, moveDeadlineDesc, drainCopiesDesc, drainProgressDesc, agentInventoryDesc,
	} {
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
	fvmsRead := c.read(ctx, kindFVM, fvms)
	if fvmsRead {
		collectFleetVMs(ch, fvms.Items)
	}
	fdis := &fleetv1alpha1.FleetDiskImageList{}
	if c.read(ctx, kindFDI, fdis) {
		collectImages(ch, fdis.Items)
	}
	moves := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	movesRead := c.read(ctx, kindMove, moves)
	if movesRead {
		collectMoves(ch, moves.Items)
	}
	inventories := &fleetv1alpha1.ImageInventoryList{}
	if c.read(ctx, kindInventory, inventories) {
		collectInventories(ch, inventories.Items)
	}
	// A drain's series need its cluster, the copies and the moves: left
	// out when any of them cannot be read, never computed from a part.
	clusters := &clusterv1.ManagedClusterList{}
	if c.read(ctx, kindCluster, clusters) && fvmsRead && movesRead {
		collectDrains(ch, clusters.Items, fvms.Items, moves.Items)
	}
	c.listErrors.Collect(ch)
}

// read lists a kind from the cache without copies (the collector only
// reads), and counts a failure.
func (c *Collector) read(ctx context.Context, kind string, list client.ObjectList) bool {
	if err := c.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		c.listErrors.WithLabelValues(kind).Inc()
		c.log.Error(err, "cannot read from the cache; its series are left out of this scrape", "kind", kind)
		return false
	}
	return true
}

func collectFleetVMs(ch chan<- prometheus.Metric, items []fleetv1alpha1.FleetVirtualMachine) {
	type key struct{ namespace, condition, status string }
	type copyKey struct {
		cluster, environment string
		phase                fleetv1alpha1.ClusterPhase
	}
	type exclusionKey struct{ namespace, reason string }
	counts := map[key]int{}
	namespaces := map[string]bool{}
	copies := map[copyKey]int{}
	exclusions := map[exclusionKey]int{}
	for i := range items {
		fvm := &items[i]
		namespaces[fvm.Namespace] = true
		for _, cs := range fvm.Status.Clusters {
			copies[copyKey{cs.Cluster, cs.Environment, knownPhase(cs.Phase)}]++
		}
		if p := fvm.Status.Placement; p != nil {
			for _, e := range p.Excluded {
				exclusions[exclusionKey{fvm.Namespace, e.Reason}] += int(e.Count)
			}
		}
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
	for k, n := range copies {
		ch <- prometheus.MustNewConstMetric(clusterCopiesDesc, prometheus.GaugeValue, float64(n), k.cluster, k.environment, string(k.phase))
	}
	for k, n := range exclusions {
		ch <- prometheus.MustNewConstMetric(exclusionsDesc, prometheus.GaugeValue, float64(n), k.namespace, k.reason)
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
			if cs.References == 0 && cs.LastReferencedTime != nil {
				ch <- prometheus.MustNewConstMetric(imageUnusedDesc, prometheus.GaugeValue, seconds(cs.LastReferencedTime.Time), img.Namespace, img.Name, cs.Cluster)
			}
		}
		for _, p := range imagePhases {
			ch <- prometheus.MustNewConstMetric(imageClustersDesc, prometheus.GaugeValue, float64(phases[p]), img.Namespace, img.Name, string(p))
		}
		retention := fleetdiskimage.DefaultRetention
		if img.Spec.Retention != nil {
			retention = img.Spec.Retention.Duration
		}
		ch <- prometheus.MustNewConstMetric(imageRetentionDesc, prometheus.GaugeValue, retention.Seconds(), img.Namespace, img.Name)
	}
}

func collectMoves(ch chan<- prometheus.Metric, items []fleetv1alpha1.FleetVirtualMachineMove) {
	for i := range items {
		m := &items[i]
		phase := m.Status.Phase
		if phase == "" {
			phase = fleetv1alpha1.MovePending
		}
		method := m.Status.Method
		if method == "" {
			method = m.Spec.Method
		}
		ch <- prometheus.MustNewConstMetric(movePhaseDesc, prometheus.GaugeValue, 1, m.Namespace, m.Name, m.Spec.FleetVirtualMachine, string(method), string(phase))
		if d, ok := move.Deadline(m); ok {
			ch <- prometheus.MustNewConstMetric(moveDeadlineDesc, prometheus.GaugeValue, seconds(d), m.Namespace, m.Name)
		}
	}
}

func collectInventories(ch chan<- prometheus.Metric, items []fleetv1alpha1.ImageInventory) {
	for i := range items {
		inv := &items[i]
		if inv.Name != fleetv1alpha1.ImageInventoryName || inv.Spec.ObservedTime == nil {
			continue
		}
		// The agent writes it into its cluster's namespace.
		ch <- prometheus.MustNewConstMetric(agentInventoryDesc, prometheus.GaugeValue, seconds(inv.Spec.ObservedTime.Time), inv.Namespace)
	}
}

// collectDrains gives each cluster that carries the drain taint its
// copies left and when its drain last moved on.
func collectDrains(ch chan<- prometheus.Metric, clusters []clusterv1.ManagedCluster, fvms []fleetv1alpha1.FleetVirtualMachine, moves []fleetv1alpha1.FleetVirtualMachineMove) {
	draining := map[string]*clusterv1.ManagedCluster{}
	progress := map[string]time.Time{}
	for i := range clusters {
		mc := &clusters[i]
		for _, t := range mc.Spec.Taints {
			if t.Key == fleetv1alpha1.DrainTaintKey {
				draining[mc.Name] = mc
				progress[mc.Name] = t.TimeAdded.Time
			}
		}
	}
	if len(draining) == 0 {
		return
	}
	copies := map[string]int{}
	for i := range fvms {
		for _, cs := range fvms[i].Status.Clusters {
			if draining[cs.Cluster] != nil {
				copies[cs.Cluster]++
			}
		}
	}
	for i := range moves {
		m := &moves[i]
		mc := draining[m.Labels[fleetv1alpha1.LabelDrain]]
		if mc == nil || !drain.Made(m, mc) {
			continue
		}
		for _, t := range []*metav1.Time{m.Status.StartTime, m.Status.CompletionTime} {
			if t != nil && t.After(progress[mc.Name]) {
				progress[mc.Name] = t.Time
			}
		}
	}
	for name := range draining {
		ch <- prometheus.MustNewConstMetric(drainCopiesDesc, prometheus.GaugeValue, float64(copies[name]), name)
		if !progress[name].IsZero() {
			ch <- prometheus.MustNewConstMetric(drainProgressDesc, prometheus.GaugeValue, seconds(progress[name]), name)
		}
	}
}

// seconds is t as a Prometheus timestamp value: Unix seconds.
func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

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
