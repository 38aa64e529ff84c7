package status

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
)

// This file holds pure functions: status is computed from what the
// reconciler read and decided, with no client, so every case is
// unit-testable.

// AppState is what the hub holds of one cluster's Argo CD Application.
type AppState struct {
	Sync, Health string
	Deleting     bool
	// Error is Argo CD's own message when it cannot render or sync the
	// Application (an error condition, or a failed sync operation).
	Error string
}

// ClusterInfo is what the hub holds of one ManagedCluster.
type ClusterInfo struct {
	Environment string
	// Available is the ManagedCluster's Available condition status; "" when
	// the cluster is not found.
	Available metav1.ConditionStatus
	// Console is the console URL the cluster claims (consolelink.Console);
	// "" when it claims none.
	Console string
}

// ImpersonationKey is the key of argocd-cm that turns Argo CD's sync
// impersonation on.
const ImpersonationKey = "application.sync.impersonation.enabled"

// Impersonation is what argocd-cm says of sync impersonation.
type Impersonation struct {
	// Known: argocd-cm was read; Problem says why not otherwise.
	Known   bool
	Enabled bool
	Problem string
}

// Inputs is everything the status is computed from.
type Inputs struct {
	Spec       fleetv1alpha1.FleetVirtualMachineSpec
	Generation int64
	// VM is the VM's namespace and name on every cluster, as the hub
	// delivers it (an inline template); zero for a git source, whose VM
	// the hub knows only from the agents' reports.
	VM types.NamespacedName
	// GracePeriod is how long a leaving cluster keeps the VM.
	GracePeriod time.Duration
	// PlacementRef names the Placement; PlacementScheduled is false until
	// the OCM scheduler has acted on it, PlacementMessage is its message.
	PlacementRef       *fleetv1alpha1.PlacementStatus
	PlacementScheduled bool
	PlacementMessage   string
	PlacementErr       error
	// Decision is the OCM scheduler's decision; Outcome is FleetVM's
	// (placement.Decide): where the VM is placed, leaving, removed.
	Decision     []string
	Outcome      placement.Outcome
	AppSetExists bool
	DeliveryErr  error
	Apps         map[string]AppState
	Clusters     map[string]ClusterInfo
	Reports      map[string]*fleetv1alpha1.VMState
	// Excluded says why clusters of the bound sets are not used (see
	// wantsExclusions); nil when not computed.
	Excluded []fleetv1alpha1.ExclusionCount
	// UnboundSets are the cluster sets of spec.placement.clusterSets not
	// bound to the FleetVirtualMachine's namespace: not used.
	UnboundSets []string
	// Conflict names the FleetVirtualMachine that delivers the same VM
	// ("namespace/name"); this one then delivers nothing.
	Conflict string
	// Images are the FleetDiskImages of spec.diskImages by name, nil when
	// one does not exist.
	Images map[string]*fleetv1alpha1.FleetDiskImage
	// Impersonation is what argocd-cm says of sync impersonation;
	// Namespace and Project are the FleetVirtualMachine's namespace and the
	// AppProject its Applications run under.
	Impersonation Impersonation
	Namespace     string
	Project       string
	Previous      fleetv1alpha1.FleetVirtualMachineStatus
	Now           metav1.Time
	// Rollout is the rollout's record (spec.rollout set); nil without.
	Rollout *Rollout
}

// Rollout is what the status records of a rollout: where it stands, and
// each cluster's part by name.
type Rollout struct {
	Status   fleetv1alpha1.RolloutStatus
	Clusters map[string]*fleetv1alpha1.ClusterRollout
}

// FailedStatus tells whether KubeVirt's printableStatus says the VM
// failed (ErrorUnschedulable, CrashLoopBackOff, ...), as the cluster's
// phase counts it, an Unknown status aside.
func FailedStatus(printable string) bool {
	return printable != "Unknown" && phaseOf(printable) == fleetv1alpha1.ClusterPhaseFailed
}

// Compute returns the new status: every owned condition is computed
// on every pass; lastTransitionTimes are kept when nothing changed.
func Compute(in Inputs) fleetv1alpha1.FleetVirtualMachineStatus {
	out := fleetv1alpha1.FleetVirtualMachineStatus{
		ObservedGeneration: in.Generation,
		Conditions:         slices.Clone(in.Previous.Conditions),
		DiskImages:         diskImages(in),
	}
	if in.PlacementRef != nil {
		p := *in.PlacementRef
		switch {
		case in.PlacementScheduled:
			// The first names and the count: where the VM is placed
			// is status.clusters, complete.
			decided := slices.Sorted(slices.Values(in.Decision))
			p.DecidedClusters = decided[:min(len(decided), maxDecidedNames)]
			p.DecidedCount = int32(len(decided))
		case in.Previous.Placement != nil:
			// OCM writes the decision, then marks the Placement
			// scheduled: the decision shows with the schedule, in one
			// status write.
			p.DecidedClusters = in.Previous.Placement.DecidedClusters
			p.DecidedCount = in.Previous.Placement.DecidedCount
		}
		p.Excluded = in.Excluded
		out.Placement = &p
	}
	entries := clusterEntries(in)
	if in.Rollout != nil {
		st := in.Rollout.Status
		out.Rollout = &st
		out.Rollout.Message = Truncate(st.Message, MaxConditionMessage)
		for i := range entries {
			entries[i].Rollout = in.Rollout.Clusters[entries[i].Cluster]
		}
	}
	out.Summary = summarize(in, entries)
	for _, c := range []metav1.Condition{
		placedCondition(in),
		deliveredCondition(in),
		readyCondition(in, entries),
		availableCondition(in, entries),
		degradedCondition(in, entries),
		confinedCondition(in),
	} {
		c.ObservedGeneration = in.Generation
		c.LastTransitionTime = in.Now
		c.Message = Truncate(c.Message, MaxConditionMessage)
		meta.SetStatusCondition(&out.Conditions, c)
	}
	// Every cluster stays listed (the hub's record of where the VM is);
	// the details of the first detailedEntries, those needing attention
	// first. The conditions and the summary above count every cluster.
	out.Clusters = compactEntries(in.Spec.RunStrategy, entries, detailedEntries)
	return out
}

// clusterEntries has one entry per cluster of the outcome, sorted.
func clusterEntries(in Inputs) []fleetv1alpha1.ClusterStatus {
	prev := map[string]fleetv1alpha1.ClusterStatus{}
	for _, c := range in.Previous.Clusters {
		prev[c.Cluster] = c
	}
	names := slices.Sorted(maps.Keys(in.Outcome.Clusters))
	entries := make([]fleetv1alpha1.ClusterStatus, 0, len(names))
	for _, name := range names {
		e := clusterEntry(in, name, in.Outcome.Clusters[name], prev[name])
		e.Message = Truncate(e.Message, maxEntryMessage)
		if p, ok := prev[name]; ok && p.Phase == e.Phase && p.LastTransitionTime != nil {
			e.LastTransitionTime = p.LastTransitionTime
		} else {
			e.LastTransitionTime = ptr.To(in.Now)
		}
		entries = append(entries, e)
	}
	return entries
}

func clusterEntry(in Inputs, name string, plan placement.Plan, prev fleetv1alpha1.ClusterStatus) fleetv1alpha1.ClusterStatus {
	e := fleetv1alpha1.ClusterStatus{Cluster: name}
	info, known := in.Clusters[name]
	var previous *fleetv1alpha1.ClusterStatus
	if prev.Cluster != "" {
		previous = &prev
	}
	overlay := placement.ChooseOverlay(placement.OverlayInput{Previous: previous, Label: info.Environment, LabelKnown: known,
		Placed: plan.State == placement.Placed, Now: in.Now.Time, GracePeriod: in.GracePeriod})
	e.Environment, e.PendingEnvironment, e.PendingEnvironmentSince = overlay.Environment, overlay.Pending, overlay.PendingSince
	app, hasApp := in.Apps[name]
	if hasApp {
		e.SyncStatus, e.Health = app.Sync, app.Health
	}
	report := in.Reports[name]
	e.ConsoleURL = consoleLink(in.VM, info, report)
	available := known && info.Available == metav1.ConditionTrue
	showReport := func() {
		// Never a stale state: an unavailable cluster's last report says
		// nothing about now.
		if report != nil && available {
			e.PrintableStatus = report.PrintableStatus
			e.Ready = report.Ready
			e.Node = report.Node
			e.IPAddresses = slices.Clone(report.IPAddresses)
		}
	}

	switch plan.State {
	case placement.Removing:
		e.Phase = fleetv1alpha1.ClusterPhaseRemoving
		e.RemovingSince = plan.Since
		showReport()
		e.Ready = false
		switch {
		case hasApp:
			e.Message = "removing the VM: Argo CD deletes it"
		case !available:
			e.Message = "the Application is gone; the removal is confirmed once the cluster's agent reports again (the cluster is not available)"
		default:
			e.Message = "removal not confirmed: the Application is gone but the cluster's agent still reports the VM (Argo CD may not have been able to reach the cluster): delete it there, or restore Argo CD's access"
		}
		if plan.Reason != "" {
			e.Message += " (" + plan.Reason + ")"
		}
		return e
	case placement.Leaving:
		e.Phase = fleetv1alpha1.ClusterPhaseLeaving
		e.LeavingSince = plan.Since
		showReport()
		if plan.Blocked {
			e.Message = "leaving: " + plan.Reason
		} else {
			until := plan.Since.Add(in.GracePeriod).UTC().Format(time.RFC3339)
			e.Message = fmt.Sprintf("leaving: %s; the VM stays until %s and is kept if the cluster qualifies again before", plan.Reason, until)
		}
		return e
	}

	switch {
	case !known:
		e.Phase = fleetv1alpha1.ClusterPhaseUnknown
		e.Message = "ManagedCluster not found"
	case info.Available != metav1.ConditionTrue:
		// Never a stale Running: an unreachable cluster's last report says
		// nothing about now. The VM stays, and no copy replaces it: when
		// the cluster comes back, one copy runs.
		e.Phase = fleetv1alpha1.ClusterPhaseUnknown
		e.Message = "cluster is not available (lease expired or unreachable): the VM stays and is not replaced; its last known state is not shown"
	case !hasApp:
		e.Phase = fleetv1alpha1.ClusterPhasePending
		e.Message = "waiting for Argo CD to create the Application"
	case imageWait(in, name) != "" && (report == nil || phaseOf(report.PrintableStatus) == fleetv1alpha1.ClusterPhaseProvisioning):
		e.Phase = fleetv1alpha1.ClusterPhaseWaitingForImage
		e.Message = imageWait(in, name)
		if report != nil {
			e.PrintableStatus = report.PrintableStatus
		}
	case report == nil:
		e.Phase = fleetv1alpha1.ClusterPhasePending
		e.Message = fmt.Sprintf("waiting for the VM to be reported (Argo CD sync %s, health %s)", orUnknown(app.Sync), orUnknown(app.Health))
	default:
		showReport()
		e.Phase = phaseOf(report.PrintableStatus)
		e.Message = report.Conditions
		if len(report.MissingNetworks) > 0 {
			e.Message = JoinMessage(fmt.Sprintf("network %s missing on this cluster: the VM cannot start here again",
				firstNames(report.MissingNetworks, 3)), e.Message)
		}
	}
	if hasApp && app.Error != "" {
		e.Message = JoinMessage("Argo CD: "+app.Error, e.Message)
	}
	if plan.Reason != "" {
		// A placed cluster's reason is a move it takes part in.
		e.Message = JoinMessage(plan.Reason, e.Message)
	}
	return e
}

// consoleLink is the link to the VM's page on the cluster's console: the
// VM the cluster's agent reports, else the one the hub delivers.
func consoleLink(vm types.NamespacedName, info ClusterInfo, report *fleetv1alpha1.VMState) string {
	if report != nil && report.Name != "" {
		vm = types.NamespacedName{Namespace: report.Namespace, Name: report.Name}
	}
	return consolelink.VM(info.Console, vm.Namespace, vm.Name)
}

func JoinMessage(a, b string) string {
	switch {
	case b == "":
		return a
	case a == "":
		return b
	}
	return a + "; " + b
}

// imageWait says which disk image the VM still waits for on the cluster,
// or "" when every one is Ready there.
func imageWait(in Inputs, cluster string) string {
	for _, ref := range in.Spec.DiskImages {
		fdi := in.Images[ref.Name]
		if fdi == nil {
			return fmt.Sprintf("waiting for disk image %s: the FleetDiskImage does not exist", ref.Name)
		}
		var entry *fleetv1alpha1.ImageClusterStatus
		for i := range fdi.Status.Clusters {
			if fdi.Status.Clusters[i].Cluster == cluster {
				entry = &fdi.Status.Clusters[i]
			}
		}
		switch {
		case entry == nil:
			return fmt.Sprintf("waiting for disk image %s to be distributed to the cluster", ref.Name)
		case entry.Phase == fleetv1alpha1.ImagePhaseReady:
			continue
		case entry.Progress != "":
			return fmt.Sprintf("waiting for disk image %s: %s (%s)", ref.Name, entry.Phase, entry.Progress)
		default:
			return fmt.Sprintf("waiting for disk image %s: %s; %s", ref.Name, entry.Phase, entry.Message)
		}
	}
	return ""
}

// diskImages lists each image the VM uses on its clusters, and on how
// many. A cluster whose state is unknown
// is still counted: its VM was using the image when last seen, and an
// image must never look less used than it may be.
func diskImages(in Inputs) []fleetv1alpha1.DiskImageUsage {
	clusters := map[string]int32{}
	for c, r := range in.Reports {
		if _, ok := in.Outcome.Clusters[c]; !ok {
			continue
		}
		for _, image := range slices.Compact(slices.Sorted(slices.Values(r.DiskImages))) {
			clusters[image]++
		}
	}
	out := make([]fleetv1alpha1.DiskImageUsage, 0, len(clusters))
	for _, image := range slices.Sorted(maps.Keys(clusters)) {
		out = append(out, fleetv1alpha1.DiskImageUsage{Image: image, Clusters: clusters[image]})
	}
	if len(out) == 0 {
		return nil
	}
	// The API holds 64; a VM reports at most 32, so more means copies that
	// differ by cluster, and the first 64 say enough.
	return out[:min(len(out), 64)]
}

// phaseOf maps KubeVirt's printableStatus onto a ClusterPhase.
func phaseOf(printable string) fleetv1alpha1.ClusterPhase {
	switch printable {
	case "Running", "Migrating", "Paused":
		return fleetv1alpha1.ClusterPhaseRunning
	case "Stopped":
		return fleetv1alpha1.ClusterPhaseStopped
	case "Stopping", "Terminating":
		return fleetv1alpha1.ClusterPhaseStopping
	case "Starting", "WaitingForReceiver":
		return fleetv1alpha1.ClusterPhaseStarting
	case "Provisioning", "WaitingForVolumeBinding", "":
		return fleetv1alpha1.ClusterPhaseProvisioning
	case "CrashLoopBackOff", "ErrorUnschedulable", "ErrImagePull", "ImagePullBackOff",
		"ErrorPvcNotFound", "ErrorDataVolumeNotFound", "DataVolumeError", "Unknown":
		return fleetv1alpha1.ClusterPhaseFailed
	default:
		return fleetv1alpha1.ClusterPhaseProvisioning
	}
}

// placedEntries are the entries of clusters the VM is placed on (not
// leaving or removing).
func placedEntries(entries []fleetv1alpha1.ClusterStatus) []fleetv1alpha1.ClusterStatus {
	var out []fleetv1alpha1.ClusterStatus
	for _, e := range entries {
		if e.Phase != fleetv1alpha1.ClusterPhaseLeaving && e.Phase != fleetv1alpha1.ClusterPhaseRemoving {
			out = append(out, e)
		}
	}
	return out
}

func summarize(in Inputs, entries []fleetv1alpha1.ClusterStatus) fleetv1alpha1.FleetSummary {
	placed := placedEntries(entries)
	s := fleetv1alpha1.FleetSummary{Placed: int32(len(placed))}
	s.Desired = s.Placed
	if in.Spec.Placement.Clusters != nil {
		s.Desired = *in.Spec.Placement.Clusters
	}
	for _, e := range placed {
		if e.Ready && e.Phase == fleetv1alpha1.ClusterPhaseRunning {
			s.Ready++
		}
		switch e.Phase {
		case fleetv1alpha1.ClusterPhaseRunning:
			s.Running++
		case fleetv1alpha1.ClusterPhaseStopped:
			s.Stopped++
		case fleetv1alpha1.ClusterPhaseFailed:
			s.Failed++
		case fleetv1alpha1.ClusterPhaseUnknown:
			s.Unknown++
		}
	}
	return s
}

// conflictMessage explains why this FleetVirtualMachine delivers nothing.
func conflictMessage(in Inputs) string {
	return fmt.Sprintf("FleetVirtualMachine %s already delivers the same VM (name and namespace); one VM has one FleetVirtualMachine, so this one delivers nothing until that one is gone", in.Conflict)
}

func placedCondition(in Inputs) metav1.Condition {
	c := metav1.Condition{Type: fleetv1alpha1.ConditionPlaced}
	placed := in.Outcome.InState(placement.Placed)
	moving := slices.Concat(in.Outcome.InState(placement.Leaving), in.Outcome.InState(placement.Removing))
	movingNote := ""
	if len(moving) > 0 {
		movingNote = fmt.Sprintf("; a new copy starts only once the VM has left %s (two copies of one VM never run at once)", listNames(moving))
	}
	switch {
	case in.Conflict != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonConflict, conflictMessage(in)
	case len(in.UnboundSets) > 0 && len(in.UnboundSets) == len(placement.ClusterSets(in.Spec)):
		c.Status, c.Reason = metav1.ConditionFalse, fleetv1alpha1.ReasonClusterSetsNotBound
		c.Message = unboundMessage(in.UnboundSets)
	case in.PlacementErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, fleetv1alpha1.ReasonReconciling, Truncate(in.PlacementErr.Error(), MaxErrorInMessage)
	case len(placed) == 0 && !in.PlacementScheduled:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, fleetv1alpha1.ReasonPlacementPending, "waiting for the OCM scheduler to decide"+movingNote
	case len(placed) == 0 && len(moving) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, fleetv1alpha1.ReasonNotEnoughClusters
		c.Message = "not placed on any cluster yet" + movingNote
	case len(placed) == 0:
		c.Status, c.Reason = metav1.ConditionFalse, fleetv1alpha1.ReasonNoClusters
		c.Message = "no cluster qualifies: " + orDefault(exclusionMessage(in.Excluded), orDefault(Truncate(in.PlacementMessage, MaxErrorInMessage), "no ManagedCluster matches")) +
			". A cluster must be in a listed cluster set, match the environment and selector, and have a node with room for the VM and its networks by the fleetvm-capacity score (published by the fleetvm addon agent); kubectl fleetvm explain lists every cluster"
	case in.Spec.Placement.Clusters != nil && int32(len(placed)) < *in.Spec.Placement.Clusters:
		c.Status, c.Reason = metav1.ConditionFalse, fleetv1alpha1.ReasonNotEnoughClusters
		c.Message = fmt.Sprintf("placed on %d of %d clusters (%s)", len(placed), *in.Spec.Placement.Clusters, listNames(placed))
		if len(moving) == 0 {
			c.Message += ": " + orDefault(exclusionMessage(in.Excluded), orDefault(Truncate(in.PlacementMessage, MaxErrorInMessage), "not enough clusters qualify"))
		}
		c.Message += movingNote
	default:
		c.Status, c.Reason = metav1.ConditionTrue, fleetv1alpha1.ReasonClustersDecided
		c.Message = "placed on " + listNames(placed)
		if leaving := in.Outcome.InState(placement.Leaving); len(leaving) > 0 {
			c.Message += "; leaving " + listNames(leaving)
		}
	}
	if surplus := in.Outcome.Surplus; len(surplus) > 0 && in.Spec.Placement.Clusters != nil {
		c.Message += fmt.Sprintf("; %d copies run where %d are asked (found running on the clusters; %s beyond the count): none is removed on its own: exclude a cluster (its labels, the selector) to have its copy leave",
			len(placed), *in.Spec.Placement.Clusters, listNames(surplus))
	}
	if len(in.UnboundSets) > 0 && c.Reason != fleetv1alpha1.ReasonClusterSetsNotBound {
		c.Message += "; not used: " + unboundMessage(in.UnboundSets)
	}
	return c
}

// unboundMessage says which cluster sets the namespace may not use, and
// what would let it.
func unboundMessage(sets []string) string {
	return fmt.Sprintf("cluster set %s is not bound to this namespace: a ManagedClusterSetBinding of that name here, made by someone allowed to bind the set, lets the namespace use it",
		strings.Join(sets, ", "))
}

func deliveredCondition(in Inputs) metav1.Condition {
	c := metav1.Condition{Type: fleetv1alpha1.ConditionDelivered}
	targets := in.Outcome.Delivered()
	var missing, failed []string
	for _, name := range targets {
		app, ok := in.Apps[name]
		switch {
		case !ok || !in.AppSetExists:
			// Without the ApplicationSet, which the hub creates right
			// after this status is written (or reports why not next
			// time), every Application is still to come: saying so now
			// spares a status write per FleetVirtualMachine.
			missing = append(missing, name)
		case app.Error != "":
			failed = append(failed, name+": "+app.Error)
		}
	}
	switch {
	case in.Conflict != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonConflict, conflictMessage(in)
	case IsForbidden(in.DeliveryErr):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonForbidden, Truncate(in.DeliveryErr.Error(), MaxErrorInMessage)
	case in.DeliveryErr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonDeliveryFailed, Truncate(in.DeliveryErr.Error(), MaxErrorInMessage)
	case len(targets) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, fleetv1alpha1.ReasonPlacementPending, "no cluster to deliver to"
	case len(failed) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, fleetv1alpha1.ReasonDeliveryFailed
		c.Message = "Argo CD cannot deliver the VM: " + strings.Join(failed[:min(len(failed), 5)], "; ")
		if len(failed) > 5 {
			c.Message += fmt.Sprintf("; and on %d more clusters", len(failed)-5)
		}
	case len(missing) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, fleetv1alpha1.ReasonApplicationsMissing
		c.Message = "waiting for Argo CD to create the Applications of " + listNames(missing)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, fleetv1alpha1.ReasonApplicationSetReady
		c.Message = fmt.Sprintf("an Application for each of the %d clusters", len(targets))
	}
	return c
}

// settled tells whether a cluster reached the power state spec.runStrategy
// asks for.
func settled(runStrategy fleetv1alpha1.RunStrategy, e fleetv1alpha1.ClusterStatus) bool {
	running := e.Phase == fleetv1alpha1.ClusterPhaseRunning && e.Ready
	stopped := e.Phase == fleetv1alpha1.ClusterPhaseStopped
	switch runStrategy {
	case fleetv1alpha1.RunStrategyHalted:
		return stopped
	case fleetv1alpha1.RunStrategyManual:
		return running || stopped
	default:
		return running
	}
}

func readyCondition(in Inputs, entries []fleetv1alpha1.ClusterStatus) metav1.Condition {
	c := metav1.Condition{Type: fleetv1alpha1.ConditionReady}
	placed := placedEntries(entries)
	if in.Conflict != "" {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonConflict, conflictMessage(in)
		return c
	}
	if len(placed) == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonNoneReady, "not placed on any cluster"
		return c
	}
	var waiting []string
	unknown := 0
	for _, e := range placed {
		if !settled(in.Spec.RunStrategy, e) {
			waiting = append(waiting, fmt.Sprintf("%s (%s)", e.Cluster, e.Phase))
			if e.Phase == fleetv1alpha1.ClusterPhaseUnknown {
				unknown++
			}
		}
	}
	desired := len(placed)
	if in.Spec.Placement.Clusters != nil {
		desired = int(*in.Spec.Placement.Clusters)
	}
	switch {
	case len(waiting) == 0 && len(placed) < desired:
		c.Status, c.Reason = metav1.ConditionFalse, fleetv1alpha1.ReasonNotEnoughReady
		c.Message = fmt.Sprintf("ready on %d of the %d clusters asked for: only %d placed", len(placed), desired, len(placed))
	case len(waiting) == 0 && in.Spec.RunStrategy == fleetv1alpha1.RunStrategyHalted:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonStopped, fmt.Sprintf("stopped on all %d clusters, as runStrategy Halted asks", len(placed))
	case len(waiting) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady, fmt.Sprintf("ready on all %d clusters", len(placed))
	case unknown == len(waiting) && unknown == len(placed):
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, fleetv1alpha1.ReasonClustersUnknown, "no cluster reports: "+listNames(waiting)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonSomeNotReady, "not ready on "+listNames(waiting)
	}
	return c
}

func availableCondition(in Inputs, entries []fleetv1alpha1.ClusterStatus) metav1.Condition {
	c := metav1.Condition{Type: fleetv1alpha1.ConditionAvailable}
	var ready []string
	for _, e := range entries {
		// A leaving cluster's VM serves until it is removed.
		if e.Ready && phaseOf(e.PrintableStatus) == fleetv1alpha1.ClusterPhaseRunning {
			ready = append(ready, e.Cluster)
		}
	}
	switch {
	case len(ready) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady, "serving on "+listNames(ready)
		if len(ready) < len(placedEntries(entries)) || in.Spec.Placement.Clusters != nil && len(ready) < int(*in.Spec.Placement.Clusters) {
			c.Reason = fleetv1alpha1.ReasonSomeNotReady
		}
	case in.Spec.RunStrategy == fleetv1alpha1.RunStrategyHalted:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonStopped, "runStrategy Halted"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonNoneReady, "the VM is not ready on any cluster"
	}
	return c
}

func degradedCondition(in Inputs, entries []fleetv1alpha1.ClusterStatus) metav1.Condition {
	c := metav1.Condition{Type: fleetv1alpha1.ConditionDegraded}
	var failed, unknown, unconfirmed []string
	for _, e := range entries {
		plan := in.Outcome.Clusters[e.Cluster]
		_, hasApp := in.Apps[e.Cluster]
		switch {
		case e.Phase == fleetv1alpha1.ClusterPhaseRemoving && !hasApp,
			e.Phase == fleetv1alpha1.ClusterPhaseLeaving && plan.Blocked:
			unconfirmed = append(unconfirmed, e.Cluster)
		case e.Phase == fleetv1alpha1.ClusterPhaseFailed || e.Health == "Degraded" || in.Apps[e.Cluster].Error != "":
			failed = append(failed, e.Cluster)
		case e.Phase == fleetv1alpha1.ClusterPhaseUnknown:
			unknown = append(unknown, e.Cluster)
		}
	}
	switch {
	case in.Conflict != "":
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonConflict, conflictMessage(in)
	case len(failed) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonClustersFailed, "failed on "+listNames(failed)
	case len(unconfirmed) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, fleetv1alpha1.ReasonRemovalUnconfirmed
		c.Message = "the VM's removal from " + listNames(unconfirmed) + " cannot be confirmed or carried out; see each cluster's message"
	case len(unknown) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, fleetv1alpha1.ReasonClustersUnknown, "state unknown on "+listNames(unknown)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, fleetv1alpha1.ReasonAsExpected, "no cluster reports a problem"
	}
	return c
}

// listNames joins names for a message, naming at most namesInMessage.
func listNames(names []string) string { return firstNames(names, namesInMessage) }

func orUnknown(s string) string { return orDefault(s, "Unknown") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// confinedCondition says whether the clusters confine what the
// FleetVirtualMachine delivers: Argo CD syncs as a ServiceAccount of the
// destination (sync impersonation), or with its own credentials, when only
// the AppProject stands between a git repository and the cluster.
func confinedCondition(in Inputs) metav1.Condition {
	c := metav1.Condition{Type: fleetv1alpha1.ConditionConfined}
	switch {
	case !in.Impersonation.Known:
		c.Status, c.Reason = metav1.ConditionUnknown, fleetv1alpha1.ReasonArgoCDSettingsUnknown
		c.Message = "cannot tell whether Argo CD syncs as the team: " + in.Impersonation.Problem
	case !in.Impersonation.Enabled:
		c.Status, c.Reason = metav1.ConditionFalse, fleetv1alpha1.ReasonImpersonationOff
		c.Message = fmt.Sprintf("Argo CD's sync impersonation is off (%s is not \"true\" in argocd-cm): Argo CD applies what this FleetVirtualMachine delivers with its own rights on each cluster, and only AppProject %s confines a git repository: to namespace %s and the kinds the project allows, not what is inside those objects: a DataVolume or a VM's dataVolumeTemplate in it can clone another namespace's disk, or another team's disk image",
			ImpersonationKey, in.Project, in.Namespace)
	case in.Project != tenancy.ProjectName(in.Namespace):
		c.Status, c.Reason = metav1.ConditionTrue, fleetv1alpha1.ReasonImpersonated
		c.Message = fmt.Sprintf("Argo CD syncs as the ServiceAccount AppProject %s names for namespace %s in spec.destinationServiceAccounts (none: Argo CD refuses the sync); that account's rights on each cluster confine a git repository",
			in.Project, in.Namespace)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, fleetv1alpha1.ReasonImpersonated
		c.Message = fmt.Sprintf("Argo CD syncs as ServiceAccount %s/%s on each cluster: its rights (the kinds of AppProject %s, in namespace %s only) and CDI's and KubeVirt's clone authorization confine a git repository",
			in.Namespace, tenancy.ServiceAccountName, in.Project, in.Namespace)
	}
	return c
}
