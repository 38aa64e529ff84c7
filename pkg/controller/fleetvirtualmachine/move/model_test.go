package move

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// This file checks the move protocol against a model of the clusters: a
// hub that runs Step from the move's recorded status alone and delivers
// what it commands, Argo CD applying that late or not at all, KubeVirt
// starting and stopping instances, CDI importing into storage that binds
// at once or at the first consumer, agents that report late, stale or
// never, clusters that go unavailable, the hub's clock jumping past
// deadlines, work feedback lagging, the move deleted. The model is its own
// arithmetic: it shares nothing with Step but the Input it builds and the
// Output it obeys.
//
// At every state it checks: never two servers of one VM; the copy
// holding the newest data never removed (the source's disks, before the
// target's are imported, included). At the end of every schedule it heals
// the clusters and checks that the move ends, and that the VM then runs
// as the fleet asks on exactly one cluster.
//
// Schedules are seeded random; a failing one is printed event by event
// and replays with -model.seed.

var (
	modelSeed      = flag.Uint64("model.seed", 0, "replay one schedule of TestMoveProtocolModel")
	modelSchedules = flag.Int("model.schedules", 10000, "schedules TestMoveProtocolModel explores")
)

const modelTimeout = 10 * time.Minute

// modelFinalizer: the hub holds a deleted move by its finalizer until
// Step ended it (false: the move goes at once, as before it had one).
const modelFinalizer = true

// spec is a VM as delivered: what the hub asks (desired) or what Argo CD
// applied on a cluster.
type spec struct {
	exists      bool
	runStrategy string
	hold        string
	// importing: its DataVolumes import from the source's export (Cold);
	// blank: they are blank for a migration to fill (Live).
	importing, blank bool
}

// report is what an agent wrote to the hub of its VM (nil: none).
type report struct {
	printable, runStrategy, hold string
	ready                        bool
	dataVolumes                  fleetv1alpha1.DataVolumesState
}

// cluster is one managed cluster of the model.
type cluster struct {
	name string
	// desired is what the hub delivers; applied what Argo CD applied.
	desired, applied spec
	// KubeVirt and CDI: an instance runs (a server); disk is the version
	// of the data on the VM's disks (-1: none yet); dv the DataVolumes'
	// state; bound: their storage is bound.
	vmi         bool
	disk        int
	dv          fleetv1alpha1.DataVolumesState
	bound, wffc bool
	// The agent, Argo CD and the cluster's connection to the hub.
	agentUp, argoUp, available bool
	report                     *report
	// Works the hub asks for on this cluster and what the work agent
	// applied: the export (source), the receiving or sending migration.
	wantExport, wantReceive, wantSend bool
	export, receive, send             bool
	// The migrations' phases on this cluster.
	receiverPhase, senderPhase string
}

// model is the hub and its two clusters, a (source) and b (target).
type model struct {
	rng *rand.Rand
	log []string
	// Configuration of the schedule.
	method         fleetv1alpha1.MoveMethod
	fleet          fleetv1alpha1.RunStrategy
	immediateBind  bool
	now            time.Time
	move           *fleetv1alpha1.FleetVirtualMachineMove
	moveGone       bool
	deleted        bool
	placed         map[string]bool
	clusters       map[string]*cluster
	feedbackExport Export
	feedbackMig    Migration
	violation      string
	// lastPhase is the last phase the move left.
	lastPhase string
	// jumpiness is how often, in percent, a clock event jumps;
	// mayDelete: the user may delete the move in this schedule.
	jumpiness int
	mayDelete bool
}

func newModel(seed uint64) *model {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &model{rng: rng, now: t0, placed: map[string]bool{"a": true}, clusters: map[string]*cluster{}}
	w.method = []fleetv1alpha1.MoveMethod{fleetv1alpha1.MoveMethodRestart, fleetv1alpha1.MoveMethodCold, fleetv1alpha1.MoveMethodLive}[rng.IntN(3)]
	w.fleet = fleetv1alpha1.RunStrategyAlways
	if w.method != fleetv1alpha1.MoveMethodLive && rng.IntN(3) == 0 {
		w.fleet = fleetv1alpha1.RunStrategyHalted
	}
	w.immediateBind = rng.IntN(2) == 0
	w.jumpiness = []int{0, 10, 50, 100}[rng.IntN(4)]
	w.mayDelete = rng.IntN(3) == 0
	w.move = &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "vms", UID: types.UID(fmt.Sprintf("uid-%d", seed)), CreationTimestamp: metav1.NewTime(t0)},
		Spec: fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: "a", To: "b", Method: w.method,
			Timeout: &metav1.Duration{Duration: modelTimeout}},
	}
	if w.method == fleetv1alpha1.MoveMethodLive {
		// Auto: a VM with data of its own moves Live where both clusters
		// offer it.
		w.move.Spec.Method = fleetv1alpha1.MoveMethodAuto
	}
	for _, n := range []string{"a", "b"} {
		w.clusters[n] = &cluster{name: n, disk: -1, agentUp: true, argoUp: true, available: true, wffc: n == "b" && rng.IntN(2) == 0}
	}
	// The VM runs (or is held) on a as the fleet asks, reported.
	a := w.clusters["a"]
	a.desired = spec{exists: true, runStrategy: string(w.fleet)}
	a.applied = a.desired
	a.disk, a.dv, a.bound, a.vmi = 3, fleetv1alpha1.DataVolumesReady, true, w.fleet == fleetv1alpha1.RunStrategyAlways
	w.log = append(w.log, fmt.Sprintf("start: method %s, fleet %s, b's storage binds %s, CDI honours immediate binding: %v",
		w.method, w.fleet, map[bool]string{true: "at the first consumer", false: "at once"}[w.clusters["b"].wffc], w.immediateBind))
	w.agent(a)
	return w
}

func (w *model) event(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%3d  +%-6s ", len(w.log), w.now.Sub(t0).Round(time.Second))+fmt.Sprintf(format, args...))
}

// copies is what the hub reads of the clusters, as the controller builds
// move.Copy.
func (w *model) copies() map[string]Copy {
	out := map[string]Copy{}
	for n, c := range w.clusters {
		cp := Copy{Present: w.placed[n] || c.report != nil, Removing: !w.placed[n] && c.report != nil, Reported: c.report != nil, Available: c.available}
		if r := c.report; r != nil {
			cp.PrintableStatus, cp.Ready, cp.RunStrategy, cp.Hold, cp.DataVolumes = r.printable, r.ready, r.runStrategy, r.hold, r.dataVolumes
		}
		if cp.Present {
			out[n] = cp
		}
	}
	return out
}

// hub runs one reconcile: Step from the recorded status, the status
// written, and (unless it stops between the two) delivery as commanded.
func (w *model) hub(deliver bool) {
	if w.moveGone {
		w.deliver(Output{}, false)
		return
	}
	live := map[string]bool{}
	if w.method == fleetv1alpha1.MoveMethodLive {
		live = map[string]bool{"a": true, "b": true}
	}
	method := fleetv1alpha1.MoveMethodCold
	if w.method == fleetv1alpha1.MoveMethodRestart {
		method = fleetv1alpha1.MoveMethodRestart
	}
	out := Step(Input{Now: w.now, Move: w.move, RunStrategy: w.fleet, Method: method, Copies: w.copies(), Targets: []string{"b"},
		Export: w.feedbackExport, Live: live, Migration: w.feedbackMig, Deleted: w.deleted})
	before := w.move.Status.Phase
	w.move.Status = out.Status
	if before != "" && before != out.Status.Phase {
		w.lastPhase = string(before)
	}
	w.event("hub: %s -> %s %q%s", before, out.Status.Phase, out.Status.Message, describe(out))
	if w.deleted && !Active(w.move) {
		w.moveGone = true
		w.event("hub: the move's finalizer is removed; the move is gone")
	}
	if deliver {
		w.deliver(out, Active(w.move))
	} else {
		w.event("hub: stops before delivering")
	}
}

func describe(o Output) string {
	var parts []string
	if o.Target != "" {
		parts = append(parts, "target "+o.Target)
	}
	if len(o.Halt) > 0 {
		parts = append(parts, "halt "+strings.Join(o.Halt, ","))
	}
	for c, rs := range o.Holds {
		parts = append(parts, fmt.Sprintf("hold %s=%s", c, rs))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{o.RemoveFrom, "remove a"}, {o.RemoveTo, "remove b"}, {o.Export, "export"}, {o.Import, "import"}, {o.Blank, "blank"}, {o.Receive, "receive"}, {o.Send, "send"}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return " [" + strings.Join(parts, "; ") + "]"
}

// deliver turns a step's output into what the hub delivers, as the
// decision and the ApplicationSet do: the move's target joins the
// clusters placed, removals leave them, holds override the fleet's run
// strategy. Without an active move, every placed copy takes the fleet's.
func (w *model) deliver(o Output, active bool) {
	if active {
		if o.Target != "" {
			w.placed[o.Target] = true
		}
		if o.RemoveFrom {
			w.placed["a"] = false
		}
		if o.RemoveTo {
			w.placed[w.move.Status.To] = false
		}
	}
	for n, c := range w.clusters {
		d := spec{exists: w.placed[n], runStrategy: string(w.fleet)}
		if active {
			if rs, ok := o.Holds[n]; ok {
				d.runStrategy, d.hold = string(rs), o.Hold
			}
			if slices.Contains(o.Halt, n) {
				d.runStrategy, d.hold = string(fleetv1alpha1.RunStrategyHalted), o.Hold
			}
			d.importing = o.Import && n == o.Target
			d.blank = o.Blank && n == o.Target
		}
		if !d.exists {
			d = spec{}
		}
		c.desired = d
		c.wantExport = active && o.Export && n == "a"
		c.wantReceive = active && o.Receive && n == w.move.Status.To
		c.wantSend = active && o.Send && n == "a"
	}
}

// argo applies what the hub delivers to cluster c.
func (w *model) argo(c *cluster) {
	if !c.argoUp || !c.available || c.applied == c.desired {
		return
	}
	was := c.applied
	c.applied = c.desired
	switch {
	case was.exists && !c.applied.exists:
		w.event("argo %s: deletes the VM (its disks hold version %d)", c.name, c.disk)
		w.removed(c)
	case !was.exists && c.applied.exists:
		c.disk, c.dv, c.bound = -1, fleetv1alpha1.DataVolumesNotReady, false
		w.event("argo %s: creates the VM %+v", c.name, c.applied)
	default:
		w.event("argo %s: applies %+v", c.name, c.applied)
	}
}

// removed checks that the copy removed from c did not hold the newest
// data, then removes it.
func (w *model) removed(c *cluster) {
	if w.method != fleetv1alpha1.MoveMethodRestart && c.disk >= 0 {
		newest := true
		for _, o := range w.clusters {
			if o != c && o.applied.exists && o.disk >= c.disk {
				newest = false
			}
		}
		if newest {
			w.fail("the copy on %s, holding the newest data (version %d), was removed", c.name, c.disk)
		}
	}
	c.vmi, c.disk, c.dv, c.bound = false, -1, "", false
}

// kubevirt advances KubeVirt and CDI on cluster c by one step.
func (w *model) kubevirt(c *cluster) {
	a := c.applied
	if !a.exists {
		return
	}
	src := w.clusters["a"]
	switch {
	case c.dv == fleetv1alpha1.DataVolumesReady:
	case a.blank:
		c.dv, c.bound = fleetv1alpha1.DataVolumesReady, true
	case !c.bound && (!c.wffc || (a.importing && w.immediateBind) || c.vmi):
		c.bound = true
		w.event("cdi %s: storage bound", c.name)
		return
	case c.bound && a.importing:
		if src.applied.exists && !src.vmi && src.export {
			c.dv, c.disk = fleetv1alpha1.DataVolumesReady, src.disk
			w.event("cdi %s: imported version %d from a's export", c.name, c.disk)
			return
		}
	case c.bound:
		c.dv, c.disk = fleetv1alpha1.DataVolumesReady, max(c.disk, 0)
		w.event("cdi %s: disks made from their images", c.name)
		return
	}
	switch a.runStrategy {
	case string(fleetv1alpha1.RunStrategyAlways):
		if !c.vmi && (c.dv == fleetv1alpha1.DataVolumesReady || !c.bound) {
			c.vmi = true
			w.event("kubevirt %s: starts the VM", c.name)
			w.check()
			return
		}
	case string(fleetv1alpha1.RunStrategyHalted):
		if c.vmi {
			c.vmi = false
			w.event("kubevirt %s: stops the VM", c.name)
			return
		}
	}
	// A send migration moves a running VM to a waiting receiver at once.
	if c.send && c.senderPhase == "" {
		b := w.clusters[w.move.Status.To]
		switch {
		case c.vmi && b.receiverPhase == "WaitingForSync":
			b.vmi, b.disk, c.vmi = true, c.disk, false
			c.senderPhase, b.receiverPhase = migrationSucceeded, migrationSucceeded
			w.event("kubevirt: the VM migrates from %s to %s with version %d", c.name, b.name, b.disk)
			return
		case !c.vmi:
			c.senderPhase = "Failed"
			w.event("kubevirt %s: the send migration fails: no instance", c.name)
			return
		}
	}
	if c.vmi && c.dv == fleetv1alpha1.DataVolumesReady {
		c.disk++
	}
}

// printable is KubeVirt's printableStatus of c's VM.
func (c *cluster) printable() (string, bool) {
	switch {
	case c.vmi && c.dv == fleetv1alpha1.DataVolumesReady:
		return "Running", true
	case c.vmi:
		return "Starting", false
	case c.applied.runStrategy == string(RunStrategyWaitAsReceiver):
		return printableWaitingForReceiver, false
	case c.bound && c.dv != fleetv1alpha1.DataVolumesReady:
		return "Provisioning", false
	}
	// Unbound storage that waits for its first consumer reads Stopped.
	return printableStopped, false
}

// agent writes c's report to the hub.
func (w *model) agent(c *cluster) {
	if !c.agentUp || !c.available {
		return
	}
	if !c.applied.exists {
		if c.report != nil {
			w.event("agent %s: reports no VM", c.name)
		}
		c.report = nil
		return
	}
	p, ready := c.printable()
	r := &report{printable: p, ready: ready, runStrategy: c.applied.runStrategy, hold: c.applied.hold, dataVolumes: c.dv}
	if c.report == nil || *c.report != *r {
		c.report = r
		w.event("agent %s: reports %+v", c.name, *r)
	}
}

// works applies the hub's works on the clusters; feedback brings their
// status back to the hub.
func (w *model) works() {
	for _, c := range w.clusters {
		if !c.available {
			continue
		}
		if c.export != c.wantExport || c.receive != c.wantReceive || c.send != c.wantSend {
			w.event("work agent %s: export %v receive %v send %v", c.name, c.wantExport, c.wantReceive, c.wantSend)
		}
		c.export, c.receive, c.send = c.wantExport, c.wantReceive, c.wantSend
		if !c.receive {
			c.receiverPhase = ""
		}
		if !c.send {
			c.senderPhase = ""
		}
		if c.receive && c.receiverPhase == "" && c.applied.runStrategy == string(RunStrategyWaitAsReceiver) && !c.vmi {
			c.receiverPhase = "WaitingForSync"
		}
	}
}

func (w *model) feedback() {
	a, b := w.clusters["a"], w.clusters[w.move.Spec.To]
	exp := Export{}
	if a.available && a.export && a.applied.exists && !a.vmi {
		exp.Ready = true
	}
	mig := Migration{ReceiverPhase: b.receiverPhase, SenderPhase: a.senderPhase}
	if b.receiverPhase != "" {
		mig.ReceiverAddress = "sync.b:9185"
	}
	if a.senderPhase == "Failed" {
		mig.Failed = "the source's migration failed"
	}
	if !a.available || !b.available {
		return
	}
	if exp != w.feedbackExport || mig != w.feedbackMig {
		w.event("feedback: export %+v migration %+v", exp, mig)
	}
	w.feedbackExport, w.feedbackMig = exp, mig
}

func (w *model) fail(format string, args ...any) {
	if w.violation == "" {
		w.violation = fmt.Sprintf(format, args...)
		w.event("VIOLATION: %s", w.violation)
	}
}

// check holds at every state: never two servers.
func (w *model) check() {
	var servers []string
	for _, n := range []string{"a", "b"} {
		if w.clusters[n].vmi {
			servers = append(servers, n)
		}
	}
	if len(servers) > 1 {
		w.fail("two servers of one VM, on %s", strings.Join(servers, " and "))
	}
}

// randomEvent runs one event of the schedule.
func (w *model) randomEvent() {
	w.now = w.now.Add(time.Duration(1+w.rng.IntN(5)) * time.Second)
	c := w.clusters[[]string{"a", "b"}[w.rng.IntN(2)]]
	switch r := w.rng.IntN(100); {
	case r < 18:
		w.hub(true)
	case r < 20:
		w.hub(false)
	case r < 34:
		w.argo(c)
	case r < 52:
		w.kubevirt(c)
	case r < 66:
		w.agent(c)
	case r < 72:
		w.works()
	case r < 80:
		w.feedback()
	case r < 83:
		c.agentUp = !c.agentUp
		w.event("agent %s: up %v", c.name, c.agentUp)
	case r < 86:
		c.argoUp = !c.argoUp
		w.event("argo cd for %s: up %v", c.name, c.argoUp)
	case r < 89:
		c.available = !c.available
		w.event("cluster %s: available %v", c.name, c.available)
	case r < 94:
		// Per schedule, the clock jumps often, rarely or never: moves
		// that meet their deadline and moves that succeed both get
		// explored.
		if w.rng.IntN(100) < w.jumpiness {
			w.now = w.now.Add(time.Duration(1+w.rng.IntN(12)) * time.Minute)
			w.event("the hub's clock jumps")
		} else {
			w.hub(true)
		}
	case r < 96:
		if w.mayDelete && !w.deleted {
			w.deleted = true
			w.event("the user deletes the move")
			if !modelFinalizer {
				w.moveGone = true
			}
		}
	}
	w.check()
}

// heal brings every cluster back and runs everything in turn until the
// move ended and the clusters settled.
func (w *model) heal() {
	w.event("heal: every agent, Argo CD and cluster up")
	for _, c := range w.clusters {
		c.agentUp, c.argoUp, c.available = true, true, true
	}
	for range 200 {
		w.now = w.now.Add(30 * time.Second)
		w.hub(true)
		w.works()
		for _, n := range []string{"a", "b"} {
			w.argo(w.clusters[n])
			w.kubevirt(w.clusters[n])
			w.check()
		}
		w.feedback()
		for _, n := range []string{"a", "b"} {
			w.agent(w.clusters[n])
		}
		if w.violation != "" {
			return
		}
	}
	if Active(w.move) && !w.moveGone {
		w.fail("the move never ends: %s %q", w.move.Status.Phase, w.move.Status.Message)
		return
	}
	var servers []string
	for _, n := range []string{"a", "b"} {
		if w.clusters[n].vmi {
			servers = append(servers, n)
		}
	}
	if want := w.fleet == fleetv1alpha1.RunStrategyAlways; want != (len(servers) == 1) || len(servers) > 1 {
		w.fail("settled after the move, the fleet %s VM runs on %v", w.fleet, servers)
	}
}

// runModel runs the schedule of seed.
func runModel(seed uint64, events int) *model {
	w := newModel(seed)
	for range events {
		w.randomEvent()
		if w.violation != "" {
			return w
		}
	}
	w.heal()
	return w
}

func TestMoveProtocolModel(t *testing.T) {
	seeds := make([]uint64, 0, *modelSchedules)
	if *modelSeed != 0 {
		seeds = append(seeds, *modelSeed)
	} else {
		for i := range *modelSchedules {
			seeds = append(seeds, uint64(i)+1)
		}
	}
	if testing.Short() {
		seeds = seeds[:min(len(seeds), 2000)]
	}
	found := map[string]bool{}
	for _, seed := range seeds {
		w := runModel(seed, 150)
		log, violation := w.log, w.violation
		if violation == "" {
			continue
		}
		// One schedule per kind of violation: what broke, the method, the
		// phase the move was in, whether it was deleted.
		kind := violation
		if i := strings.IndexAny(kind, "0123456789"); i > 0 {
			kind = kind[:i]
		}
		kind = fmt.Sprintf("%s/%s/%s/%v", kind, w.method, w.lastPhase, w.deleted)
		if found[kind] {
			continue
		}
		found[kind] = true
		t.Errorf("schedule %d (replay: go test -run TestMoveProtocolModel -model.seed=%d): %s\n%s", seed, seed, violation, strings.Join(log, "\n"))
	}
}
