package fleetvirtualmachine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
)

// observation is what one reconcile read from the hub: the inputs of the
// placement decision and of the status.
type observation struct {
	// Placement is the candidate Placement as the API server holds it, nil
	// if missing; PlacementErr is set when it could not be read or is not
	// FleetVM's (then nothing is written to it).
	Placement    *clusterv1beta1.Placement
	PlacementErr error
	// Scheduled: the scheduler has answered the Placement as it is now.
	Scheduled bool
	// SchedulerMessage is its PlacementSatisfied message.
	SchedulerMessage string
	// Decision are the clusters the hub picked from Candidates, the
	// candidate Placement's decision (placement.Pick).
	Decision, Candidates []string
	// Candidate is the candidate Placement the FleetVirtualMachine's
	// intent and bound sets ask for, as FleetVM writes it.
	Candidate *clusterv1beta1.Placement
	// Apps are the FleetVirtualMachine's Applications by cluster.
	Apps map[string]*argoapp.Application
	// Facts of every cluster in the status, the Applications and the
	// decision.
	Facts map[string]placement.ClusterFacts
	// Allowed are the sets of spec.placement.clusterSets bound to the
	// FleetVM's namespace, Unbound the others. Sets maps the allowed ones,
	// nil for one that does not exist.
	Allowed, Unbound []string
	Sets             map[string]*clusterv1beta2.ManagedClusterSet
	// SetsErr is set when a cluster set could not be read.
	SetsErr error
	// Reports are the agents' reports of the VM by cluster.
	Reports map[string]*fleetv1alpha1.VMState
	// pick is how Decision was picked (nil: not picked), for the moves.
	pick *placement.PickInput
	// heldByArrivals: a candidate's score lets the VM in, but copies
	// still arriving there take that room (placement.Arriving); the
	// reconcile looks again shortly, as they start or fail.
	heldByArrivals bool
}

// observe reads everything the decision and the status need. Reads come
// from the cache; an error leaves the affected input unknown (and the
// decision keeps what it cannot judge) and is returned joined.
func (r *Reconciler) observe(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (*observation, error) {
	obs := &observation{Apps: map[string]*argoapp.Application{}, Facts: map[string]placement.ClusterFacts{}, Reports: map[string]*fleetv1alpha1.VMState{}}
	var errs []error

	apps, err := r.listApplications(ctx, fvm)
	if err != nil {
		errs = append(errs, err)
	}
	for i := range apps {
		if c := apps[i].Label(fleetv1alpha1.LabelCluster); c != "" {
			obs.Apps[c] = &apps[i]
		}
	}

	// A namespace may use a cluster set only through a
	// ManagedClusterSetBinding in that namespace (OCM's rule): sets the
	// FleetVM lists but its namespace has no binding for are not used.
	obs.Sets = map[string]*clusterv1beta2.ManagedClusterSet{}
	for _, name := range placement.ClusterSets(fvm.Spec) {
		switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: fvm.Namespace, Name: name}, &clusterv1beta2.ManagedClusterSetBinding{}); {
		case apierrors.IsNotFound(err):
			obs.Unbound = append(obs.Unbound, name)
			continue
		case err != nil:
			obs.SetsErr = errors.Join(obs.SetsErr, fmt.Errorf("get ManagedClusterSetBinding %s/%s: %w", fvm.Namespace, name, err))
			continue
		}
		obs.Allowed = append(obs.Allowed, name)
		set := &clusterv1beta2.ManagedClusterSet{}
		switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, set); {
		case apierrors.IsNotFound(err):
			obs.Sets[name] = nil
		case err != nil:
			obs.SetsErr = errors.Join(obs.SetsErr, fmt.Errorf("get ManagedClusterSet %s: %w", name, err))
		default:
			obs.Sets[name] = set
		}
	}
	if obs.SetsErr != nil {
		errs = append(errs, obs.SetsErr)
	}

	if err := r.observeCandidates(ctx, fvm, obs); err != nil {
		errs = append(errs, err)
	}

	reported, err := r.reportedCopies(ctx, fvm)
	if err != nil {
		errs = append(errs, err)
	}
	names := slices.Clone(obs.Decision)
	for c := range reported {
		names = append(names, c)
	}
	for _, c := range fvm.Status.Clusters {
		names = append(names, c.Cluster)
	}
	for c := range obs.Apps {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		if err := r.readFacts(ctx, obs, name); err != nil {
			errs = append(errs, err)
		}
		// A report counts only in the namespace of a cluster that exists:
		// that cluster's agent is the only one allowed to write there.
		if vm, ok := reported[name]; ok && obs.Facts[name].Cluster != nil {
			obs.Reports[name] = vm
		}
	}
	return obs, errors.Join(errs...)
}

// readFacts reads what the decision and the status need of one cluster.
func (r *Reconciler) readFacts(ctx context.Context, obs *observation, name string) error {
	facts := placement.ClusterFacts{}
	mc := &clusterv1.ManagedCluster{}
	var err error
	switch getErr := r.Client.Get(ctx, types.NamespacedName{Name: name}, mc); {
	case apierrors.IsNotFound(getErr):
	case getErr != nil:
		facts.Err = fmt.Errorf("get ManagedCluster %s: %w", name, getErr)
		err = facts.Err
	default:
		facts.Cluster = mc
	}
	if obs.SetsErr != nil {
		facts.Err = obs.SetsErr
	}
	obs.Facts[name] = facts
	return err
}

// reportedCopies reads, by cluster, every copy of the FleetVirtualMachine's
// VM that an agent reports: the VMs labelled with this FleetVirtualMachine
// and, for an inline template, the VM of its name and namespace whatever
// FleetVirtualMachine its labels name (a copy left running by an earlier
// FleetVirtualMachine deleted with Orphan, or by the loser of a race for
// the VM). The clusters are the truth: these are copies whether or not the
// hub remembers them (its status and Applications may be gone, after a
// restore from backup for instance).
func (r *Reconciler) reportedCopies(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (map[string]*fleetv1alpha1.VMState, error) {
	out := map[string]*fleetv1alpha1.VMState{}
	// The reports on this FleetVirtualMachine and those listing its VM:
	// one List when the VM is of its name (IndexReport).
	key := client.ObjectKeyFromObject(fvm).String()
	id, claims := vmclaim.Key(fvm)
	var reports fleetv1alpha1.VMReportList
	if err := r.Client.List(ctx, &reports, client.MatchingFields{IndexReport: key}); err != nil {
		return nil, fmt.Errorf("list VMReports of %s: %w", klog.KObj(fvm), err)
	}
	if claims && id != key {
		var others fleetv1alpha1.VMReportList
		if err := r.Client.List(ctx, &others, client.MatchingFields{IndexReport: id}); err != nil {
			return nil, fmt.Errorf("list VMReports of VM %s: %w", id, err)
		}
		reports.Items = append(reports.Items, others.Items...)
	}
	for i := range reports.Items {
		report := &reports.Items[i]
		if !reportOn(report, fvm) {
			continue
		}
		if vm := copyIn(report, id, claims); vm != nil {
			out[report.Namespace] = vm
		}
	}
	if !claims {
		return out, nil
	}
	for i := range reports.Items {
		report := &reports.Items[i]
		if _, ok := out[report.Namespace]; ok || report.Spec.FleetVM.Namespace != fvm.Namespace {
			continue
		}
		if vm := copyIn(report, id, true); vm != nil {
			out[report.Namespace] = vm
		}
	}
	return out, nil
}

// copyIn returns the copy of the VM a report lists: the VM named id
// ("namespace/name") when the FleetVirtualMachine claims one, else the
// first VM (a git source's VMs are known only by their labels).
func copyIn(report *fleetv1alpha1.VMReport, id string, claims bool) *fleetv1alpha1.VMState {
	for i := range report.Spec.VMs {
		vm := &report.Spec.VMs[i]
		if !claims || vm.Namespace+"/"+vm.Name == id {
			return vm
		}
	}
	return nil
}

// observeCandidates reads the candidate Placement of the
// FleetVirtualMachine's intent and picks its clusters from its decision.
func (r *Reconciler) observeCandidates(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, obs *observation) error {
	if len(obs.Allowed) == 0 {
		return nil
	}
	want := r.candidatePlacement(fvm, sortedCopy(obs.Allowed))
	obs.Candidate = want
	p := &clusterv1beta1.Placement{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), p); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		obs.PlacementErr = fmt.Errorf("get Placement %s: %w", klog.KObj(want), err)
		return nil
	case !isCandidatePlacement(p):
		obs.PlacementErr = fmt.Errorf("candidate Placement %s exists and is not FleetVM's (label %s=%q): FleetVM leaves it alone",
			klog.KObj(p), candidatesLabel, p.Labels[candidatesLabel])
		return nil
	}
	obs.Placement = p
	obs.Scheduled, obs.SchedulerMessage = scheduled(p)
	var err error
	// A candidate Placement's name is the hash of its spec: a decision
	// left by an earlier one of that name (deleted, its decisions not yet
	// garbage-collected, which OCM then updates in place) is about the
	// same intent, so it is read whatever its owner.
	if obs.Candidates, err = r.readDecisions(ctx, p); err != nil {
		obs.Scheduled = false
		return err
	}
	if obs.Candidates == nil {
		obs.Candidates = []string{} // read: none qualifies
	}
	if !obs.Scheduled {
		return nil
	}
	// No new copy goes to a draining cluster: the drain taint is
	// NoSelectIfNew, so the scheduler keeps one it had selected.
	draining, err := r.drainingClusters(ctx)
	if err != nil {
		obs.Scheduled = false
		return err
	}
	candidates := obs.Candidates
	if len(draining) > 0 {
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(c string) bool { return draining[c] })
	}
	in := placement.PickInput{Key: client.ObjectKeyFromObject(fvm), Desired: fvm.Spec.Placement.Clusters, Candidates: candidates, Load: r.load.Of,
		Fits: func(string) bool { return true }, Placed: placedClusters(fvm)}
	// The agent's current score, as the fit predicate reads it (none: the
	// VM does not fit), read once per cluster: ranking by free capacity
	// and checking the fit both ask for it.
	scores := map[string]map[string]int32{}
	score := func(cluster string) map[string]int32 {
		if v, ok := scores[cluster]; ok {
			return v
		}
		s, err := r.scores.Read(ctx, r.Client, cluster)
		if err != nil {
			s = capacity.Score{}
		}
		scores[cluster] = s.Valid(r.Clock.Now()) // expired: no score
		return scores[cluster]
	}
	shape, shaped := r.shapes.Of(fvm)
	if shaped {
		in.Fits = func(c string) bool {
			fits, held := r.arriving.Fits(c, shape, score(c)[shape.Name()])
			obs.heldByArrivals = obs.heldByArrivals || held
			return fits
		}
		in.Unscored = func(c string) bool {
			s := score(c)
			_, scored := s[shape.Name()]
			return s != nil && !scored
		}
	}
	in.Free = placement.FreeCapacity(fvm.Spec.Placement.Prioritizer, score)
	pick := in
	if shaped && fvm.Spec.RunStrategy != fleetv1alpha1.RunStrategyHalted {
		// A new copy's room is taken as it is picked, in one step with
		// the check: reconciles running side by side see it before this
		// one records its status (Arriving.Assume). The reconcile ends
		// the assumptions its status does not keep. The observation's
		// input (obs.pick, read by moves) only checks.
		pick.Fits = func(c string) bool {
			fits, held := r.arriving.Assume(in.Key, c, shape, score(c)[shape.Name()])
			obs.heldByArrivals = obs.heldByArrivals || held
			return fits
		}
	}
	obs.Decision = placement.Pick(pick)
	obs.pick = &in
	return nil
}

// decisionInput turns an observation into the decision's inputs.
func (r *Reconciler) decisionInput(fvm *fleetv1alpha1.FleetVirtualMachine, obs *observation, now metav1.Time) placement.Input {
	in := placement.Input{
		Now:         now.Time,
		GracePeriod: r.Config.GracePeriod,
		Desired:     fvm.Spec.Placement.Clusters,
		Scheduled:   obs.Scheduled,
		Decision:    obs.Decision,
		Clusters:    map[string]placement.Presence{},
		Intent:      map[string]placement.Intent{},
	}
	for _, c := range fvm.Status.Clusters {
		in.Clusters[c.Cluster] = placement.Presence{Recorded: true, LeavingSince: c.LeavingSince, RemovingSince: c.RemovingSince,
			LeavingForSurplus: c.LeavingSince != nil && strings.HasPrefix(c.Message, "leaving: "+placement.SurplusReason)}
	}
	for c, app := range obs.Apps {
		p := in.Clusters[c]
		p.App = placement.AppLive
		if app.DeletionTimestamp != nil {
			p.App = placement.AppDeleting
		}
		p.AppBlocked = delivery.RemovalBlocked(app)
		in.Clusters[c] = p
	}
	for c := range obs.Reports {
		p := in.Clusters[c]
		p.Reported = true
		in.Clusters[c] = p
	}
	if fvm.Status.ObservedGeneration > 0 {
		before := fvm.Status.Summary.Desired
		in.DesiredBefore = &before
	}
	for c, facts := range obs.Facts {
		in.Intent[c] = placement.IntentFor(fvm.Spec.Placement, r.Config.EnvironmentLabel, facts, obs.Sets)
	}
	return in
}

// scheduled tells whether the OCM scheduler has acted on the Placement as
// it is now, and its PlacementSatisfied message.
func scheduled(p *clusterv1beta1.Placement) (bool, string) {
	c := meta.FindStatusCondition(p.Status.Conditions, clusterv1beta1.PlacementConditionSatisfied)
	if c == nil || c.ObservedGeneration < p.Generation && c.ObservedGeneration != 0 {
		return false, ""
	}
	return true, c.Message
}

// readDecisions returns the clusters the scheduler decided for a candidate
// Placement, sorted, from any decision of its name: a candidate
// Placement's name is the hash of its spec, so a decision left by an
// earlier one of that name is about the same intent. The slice is shared
// (decisionMemo): callers read it and never change it.
func (r *Reconciler) readDecisions(ctx context.Context, p *clusterv1beta1.Placement) ([]string, error) {
	// Read only: a candidate Placement's decisions list every qualifying
	// cluster, and are not copied for each reconcile.
	var list clusterv1beta1.PlacementDecisionList
	if err := r.Client.List(ctx, &list, client.InNamespace(p.Namespace),
		client.MatchingFields{IndexPlacement: p.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list PlacementDecisions of %s: %w", klog.KObj(p), err)
	}
	key := client.ObjectKeyFromObject(p)
	if clusters, ok := r.decisions.get(key, list.Items); ok {
		return clusters, nil
	}
	n := 0
	for i := range list.Items {
		n += len(list.Items[i].Status.Decisions)
	}
	clusters := make([]string, 0, n)
	for i := range list.Items {
		for _, cd := range list.Items[i].Status.Decisions {
			clusters = append(clusters, cd.ClusterName)
		}
	}
	slices.Sort(clusters)
	clusters = slices.Compact(clusters)
	r.decisions.put(key, list.Items, clusters)
	return clusters, nil
}

// decisionMemo keeps, per candidate Placement, its decided clusters
// sorted, with the UID and resourceVersion of each PlacementDecision they
// were read from. Every FleetVirtualMachine of the fleet that picks from
// a Placement reads its decisions on every reconcile (800 clusters in the
// benchmark's fleet, shared by thousands): while the cache holds the same
// decisions at the same versions, the sorted list is the one read last
// time. The decisions are still listed from the cache each time, so an
// answer is never older than the cache. Safe for concurrent use.
type decisionMemo struct {
	mu sync.Mutex
	m  map[types.NamespacedName]memoizedDecisions
}

type memoizedDecisions struct {
	versions map[types.UID]string
	clusters []string
}

// decisionMemoLimit bounds the memo: past it, it starts afresh (candidate
// Placements deleted since leave entries behind).
const decisionMemoLimit = 1024

func (d *decisionMemo) get(key types.NamespacedName, items []clusterv1beta1.PlacementDecision) ([]string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[key]
	if !ok || len(e.versions) != len(items) {
		return nil, false
	}
	for i := range items {
		if rv, ok := e.versions[items[i].UID]; !ok || rv != items[i].ResourceVersion {
			return nil, false
		}
	}
	return e.clusters, true
}

func (d *decisionMemo) put(key types.NamespacedName, items []clusterv1beta1.PlacementDecision, clusters []string) {
	versions := make(map[types.UID]string, len(items))
	for i := range items {
		versions[items[i].UID] = items[i].ResourceVersion
	}
	if len(versions) != len(items) {
		return // the same decision twice: not one version of them
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= decisionMemoLimit {
		d.m = map[types.NamespacedName]memoizedDecisions{}
	}
	d.m[key] = memoizedDecisions{versions: versions, clusters: clusters}
}

// listApplications returns the Applications of a FleetVirtualMachine: those
// whose labels name it.
func (r *Reconciler) listApplications(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) ([]argoapp.Application, error) {
	var list argoapp.ApplicationList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Config.ArgoNamespace),
		client.MatchingFields{IndexOwner: client.ObjectKeyFromObject(fvm).String()}); err != nil {
		return nil, fmt.Errorf("list Applications: %w", err)
	}
	return list.Items, nil
}

// getOwned reads the object of that name in the Argo CD namespace into obj
// and returns it when it belongs to the FleetVirtualMachine; nil, nil when
// there is none; an error when it belongs to someone else. Nothing found
// by name is changed without this check.
func (r *Reconciler) getOwned(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, obj client.Object, name string) (client.Object, error) {
	return r.getOwnedFrom(ctx, r.Client, fvm, obj, name)
}

// getOwnedFrom is getOwned reading from reader.
func (r *Reconciler) getOwnedFrom(ctx context.Context, reader client.Reader, fvm *fleetv1alpha1.FleetVirtualMachine, obj client.Object, name string) (client.Object, error) {
	err := reader.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	kind := "object"
	if gvk, gerr := r.Client.GroupVersionKindFor(obj); gerr == nil {
		kind = gvk.Kind
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", kind, r.Config.ArgoNamespace, name, err)
	}
	if !delivery.IsOwnedBy(obj, fvm) {
		return nil, fmt.Errorf("%s %s exists and belongs to another owner (labels %s=%q, %s=%q): FleetVM leaves it alone",
			kind, klog.KObj(obj), fleetv1alpha1.LabelFleetVMNamespace, obj.GetLabels()[fleetv1alpha1.LabelFleetVMNamespace],
			fleetv1alpha1.LabelFleetVMName, obj.GetLabels()[fleetv1alpha1.LabelFleetVMName])
	}
	return obj, nil
}

// reportName is the name of a FleetVirtualMachine's VMReport in a cluster
// namespace.
func reportName(fvm *fleetv1alpha1.FleetVirtualMachine) string {
	return fvm.Namespace + "." + fvm.Name
}

// reportOn says whether report is the agent's report on fvm (of its name,
// naming it), not one a List by IndexReport found for a VM it lists.
func reportOn(report *fleetv1alpha1.VMReport, fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	ref := report.Spec.FleetVM
	return report.Name == reportName(fvm) && ref.Namespace == fvm.Namespace && ref.Name == fvm.Name
}
