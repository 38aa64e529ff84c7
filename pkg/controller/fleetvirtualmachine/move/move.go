// Package move holds the one rule that runs an intended move of a VM's
// copy from one cluster to another (a FleetVirtualMachineMove): from what
// the clusters report, it says the move's next phase and what delivery
// does meanwhile. Like placement.Decide it is a pure function of explicit
// inputs, the clock included.
//
// The rule is make-before-break without two servers. Restart: the VM is
// created stopped on the target (its disks provisioned there) while the
// source still serves; then it is stopped on the source. Cold: it is
// stopped on the source first, which exports its disks (KubeVirt's
// VirtualMachineExport); then it is created stopped on the target, whose
// CDI imports them. Either way, once the source reports it stopped and the
// target reports it stopped with its disks ready, it is started on the
// target; once the target reports it ready the source's copy is removed.
// A failure or the timeout before the VM is ready on the target rolls
// back: the target's copy is stopped (confirmed stopped when it may have
// started) and removed, the export ends, and the source's copy is started
// again.
//
// The package reads and writes nothing; move/runner runs the moves
// against the hub with it.
package move

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// DefaultTimeout is spec.timeout's default.
const DefaultTimeout = 15 * time.Minute

// Deadline is when the move's timeout passes, as the rule reads it: from
// status.startTime once it started, from status.pendingTime while it
// waits to start. A move that has ended, or that the hub has not seen
// yet, has none (false).
func Deadline(m *fleetv1alpha1.FleetVirtualMachineMove) (time.Time, bool) {
	if m.Status.Phase.Terminal() {
		return time.Time{}, false
	}
	timeout := DefaultTimeout
	if m.Spec.Timeout != nil {
		timeout = m.Spec.Timeout.Duration
	}
	switch {
	case m.Status.StartTime != nil:
		return m.Status.StartTime.Add(timeout), true
	case m.Status.PendingTime != nil:
		return m.Status.PendingTime.Add(timeout), true
	}
	return time.Time{}, false
}

// Copy is what the hub knows of the VM on one cluster.
type Copy struct {
	// Present: FleetVM records, delivers or the agent reports the VM there.
	Present bool
	// Removing: FleetVM is removing it.
	Removing bool
	// Reported: the cluster's agent reports the VM.
	Reported bool
	// As reported.
	PrintableStatus string
	Ready           bool
	RunStrategy     string
	// Hold is the hold the report was observed under (VMState.hold).
	Hold string
	// DataVolumes is what CDI says of the VM's DataVolumes there.
	DataVolumes fleetv1alpha1.DataVolumesState
	// Available: the cluster is available (its lease is renewed): only
	// then does its report prove anything.
	Available bool
}

// stopped tells whether the cluster proves the VM stopped by the given
// hold: its available cluster reports it Halted, no instance left,
// observed under that hold. A report observed before the hold reached
// the cluster (an agent that stopped, feedback that lags) proves nothing.
func (c Copy) stopped(hold string) bool {
	return c.stoppedAs(hold, fleetv1alpha1.RunStrategyHalted)
}

// stoppedAs is stopped for a VM held in run strategy rs.
func (c Copy) stoppedAs(hold string, rs fleetv1alpha1.RunStrategy) bool {
	return c.proves(hold) && c.RunStrategy == string(rs) && !c.Ready && c.PrintableStatus == printableStopped
}

// proves tells whether the report is proof of the present under the
// given hold: it comes from an available cluster and was observed under it.
func (c Copy) proves(hold string) bool {
	return c.Reported && c.Available && c.Hold == hold
}

// manual tells whether the cluster proves the VM held Manual by the
// given hold: nothing restarts it once a migration stopped it there.
func manual(c Copy, hold string) bool {
	return c.proves(hold) && c.RunStrategy == string(fleetv1alpha1.RunStrategyManual)
}

// imported tells whether the cluster proves the VM's disks imported
// under the given hold: CDI reports every DataVolume Succeeded. A VM whose
// DataVolumes wait for their first consumer reads Stopped before
// anything is imported: its printableStatus proves nothing.
func (c Copy) imported(hold string) bool {
	return c.proves(hold) && c.DataVolumes == fleetv1alpha1.DataVolumesReady
}

// HoldOf is the hold a move delivers its held VMs under, in the phase
// (AnnotationHold): each phase's own, so that a report observed in an
// earlier phase, or before a rollback held the VM again, proves nothing.
func HoldOf(m *fleetv1alpha1.FleetVirtualMachineMove, phase fleetv1alpha1.MovePhase) string {
	return string(m.UID) + "." + string(phase)
}

// printableStopped is KubeVirt's printableStatus of a VM with no
// instance whose volumes are ready.
const printableStopped = "Stopped"

// failedStatuses are KubeVirt printableStatus values that say the VM will
// not come up on its own.
var failedStatuses = []string{
	"CrashLoopBackOff", "ErrorUnschedulable", "ErrImagePull", "ImagePullBackOff",
	"ErrorPvcNotFound", "DataVolumeError", "ErrorDataVolumeNotFound",
}

// Input is everything one step of a move reads.
type Input struct {
	Now  time.Time
	Move *fleetv1alpha1.FleetVirtualMachineMove
	// RunStrategy is the FleetVirtualMachine's: the state the VM takes on
	// the target.
	RunStrategy fleetv1alpha1.RunStrategy
	// Method is the method the VM allows (MethodFor), Refused why it
	// allows none.
	Method  fleetv1alpha1.MoveMethod
	Refused string
	// Copies are the VM's copies by cluster (a cluster missing holds none).
	Copies map[string]Copy
	// Targets are the clusters a new copy may go to now, best first: they
	// qualify by the placement, hold no copy, and are not draining.
	Targets []string
	// Busy names another move of the same FleetVirtualMachine that runs
	// first.
	Busy string
	// WaitFor names what else a move that has not started waits for.
	WaitFor string
	// Deleting: the FleetVirtualMachine is being deleted.
	Deleting bool
	// Export is the state of the source's export of the VM's disks (Cold).
	Export Export
	// Live are the clusters that offer decentralized live migration.
	Live map[string]bool
	// Migration is the state of a Live move's two migrations.
	Migration Migration
	// Deleted: the move is being deleted (its finalizer holds it until
	// the step ends it).
	Deleted bool
}

// Migration is what the hub knows of a Live move's migrations, from the
// clusters.
type Migration struct {
	// ReceiverAddress is the synchronization address the target's
	// migration reports ("" not yet): the source's migration connects to it.
	ReceiverAddress string
	// ReceiverPhase and SenderPhase are the two migrations' phases.
	ReceiverPhase, SenderPhase string
	// Failed says why a migration failed ("" none).
	Failed string
}

// succeeded tells whether both sides report the migration done.
func (m Migration) succeeded() bool {
	return m.ReceiverPhase == migrationSucceeded && m.SenderPhase == migrationSucceeded
}

const (
	migrationSucceeded          = "Succeeded"
	printableWaitingForReceiver = "WaitingForReceiver"
)

// RunStrategyWaitAsReceiver holds a Live move's target as the receiver of
// the migration (its source is held Manual, so that neither Argo CD nor
// KubeVirt restarts it once the migration stopped it).
const RunStrategyWaitAsReceiver fleetv1alpha1.RunStrategy = "WaitAsReceiver"

// Export is what the hub knows of a Cold move's export.
type Export struct {
	// Ready: the source serves every disk through its export proxy, and
	// the target holds what its import needs to read them.
	Ready bool
	// Failed says why the export cannot serve ("" while it may).
	Failed string
}

// Output is the step's result.
type Output struct {
	// Status is the move's new status.
	Status fleetv1alpha1.FleetVirtualMachineMoveStatus
	// Target is the cluster delivery must hold the moving VM on, as the
	// move's target ("" none).
	Target string
	// Halt are the clusters whose copy is held stopped now.
	Halt []string
	// RemoveFrom: the source's copy is removed now; RemoveTo: the
	// target's is (the move rolled back).
	RemoveFrom, RemoveTo bool
	// Export: the source exports the VM's disks now (Cold). Import: the
	// target's VM imports its disks from that export.
	Export, Import bool
	// Holds are the clusters whose VM is held in another state than
	// Halted (Live: the source Manual, the target WaitAsReceiver).
	Holds map[string]fleetv1alpha1.RunStrategy
	// Blank: the target's VM has blank disks of its templates, which the
	// migration fills (Live). Receive and Send: the target's and the
	// source's migration exist.
	Blank, Receive, Send bool
	// Hold is the hold delivery stamps on the VM of every cluster this
	// step holds (Halt, Holds), AnnotationHold: a report proves a held
	// state only once it carries it.
	Hold string
	// LookAgain is when the timeout passes (0: no deadline pending).
	LookAgain time.Duration
}

// Active tells whether a move still acts on the VM's copies.
func Active(m *fleetv1alpha1.FleetVirtualMachineMove) bool {
	return !m.Status.Phase.Terminal()
}

// Started tells whether a move left Pending.
func Started(m *fleetv1alpha1.FleetVirtualMachineMove) bool {
	return Active(m) && m.Status.Phase != "" && m.Status.Phase != fleetv1alpha1.MovePending
}

// Step runs the rule once. Success is checked before deadlines and
// failures: a VM ready on its target, or a migration done, is never
// rolled back because the hub saw it late.
func Step(in Input) Output {
	out := step(in)
	if len(out.Halt) > 0 || len(out.Holds) > 0 {
		out.Hold = HoldOf(in.Move, out.Status.Phase)
	}
	return out
}

func step(in Input) Output {
	m := in.Move
	st := *m.Status.DeepCopy()
	now := metav1.NewTime(in.Now)
	out := Output{}
	from, to := m.Spec.From, st.To
	timeout := DefaultTimeout
	if m.Spec.Timeout != nil {
		timeout = m.Spec.Timeout.Duration
	}
	fail := func(msg string) Output {
		st.Phase, st.Message, st.CompletionTime = fleetv1alpha1.MoveFailed, msg, &now
		return Output{Status: st}
	}
	rollBack := func(reason string) Output {
		st.Phase, st.Message = fleetv1alpha1.MoveRollingBack, "rolling back: "+reason
		return rollingBack(in, st, now)
	}
	// The timeout counts from the start until the VM is ready on the
	// target.
	deadline := func() (bool, time.Duration) {
		if st.StartTime == nil {
			return false, 0
		}
		left := st.StartTime.Add(timeout).Sub(in.Now)
		return left <= 0, left
	}
	const deletedMsg = "the move was deleted"

	switch st.Phase {
	case fleetv1alpha1.MoveSucceeded, fleetv1alpha1.MoveFailed:
		return Output{Status: st}

	case "", fleetv1alpha1.MovePending:
		// Pending counts against the timeout too, from when the hub first
		// found the move waiting (on its own clock): a move that cannot
		// start does not wait for ever.
		pendingLeft := timeout
		if st.PendingTime != nil {
			pendingLeft = st.PendingTime.Add(timeout).Sub(in.Now)
		}
		wait := func(msg string) Output {
			st.Phase, st.Message = fleetv1alpha1.MovePending, msg
			if st.PendingTime == nil {
				st.PendingTime = &now
			}
			return Output{Status: st, LookAgain: pendingLeft}
		}
		switch {
		case in.Deleted:
			return fail(deletedMsg + " before it started")
		case in.Deleting:
			return fail("the FleetVirtualMachine is being deleted")
		case in.Busy != "" && pendingLeft <= 0:
			return fail(fmt.Sprintf("move %s of the same FleetVirtualMachine did not end within %s", in.Busy, timeout))
		case in.Busy != "":
			return wait(fmt.Sprintf("waiting for move %s of the same FleetVirtualMachine to end", in.Busy))
		case in.WaitFor != "" && pendingLeft <= 0:
			return fail(fmt.Sprintf("the move could not start within %s: it waited for %s", timeout, in.WaitFor))
		case in.WaitFor != "":
			return wait("waiting for " + in.WaitFor)
		}
		if c := in.Copies[from]; !c.Present || c.Removing {
			return fail(fmt.Sprintf("the VM has no copy on cluster %s to move", from))
		}
		method, why := chooseMethod(m.Spec.Method, in.Method, in.Refused)
		if why != "" {
			return fail(why)
		}
		target := m.Spec.To
		switch {
		case target != "" && in.Copies[target].Present:
			return fail(fmt.Sprintf("cluster %s already holds a copy of the VM", target))
		case target != "" && !slices.Contains(in.Targets, target):
			return fail(fmt.Sprintf("cluster %s does not qualify for the VM now: its environment, cluster sets, taints "+
				"(a drain among them), free room or networks keep it out; kubectl fleetvm explain %s says why", target, m.Spec.FleetVirtualMachine))
		case target == "" && len(in.Targets) == 0:
			return fail(fmt.Sprintf("no other cluster qualifies for the VM now; kubectl fleetvm explain %s says why", m.Spec.FleetVirtualMachine))
		case target == "":
			target = in.Targets[0]
		}
		switch live := in.Live[from] && in.Live[target]; {
		case method == fleetv1alpha1.MoveMethodLive && !live:
			return fail(fmt.Sprintf("spec.method Live needs both clusters to offer decentralized live migration (label %s=true): %s",
				fleetv1alpha1.LabelLiveMigration, offering(in.Live, from, target)))
		case method == fleetv1alpha1.MoveMethodCold && live && (m.Spec.Method == "" || m.Spec.Method == fleetv1alpha1.MoveMethodAuto):
			method = fleetv1alpha1.MoveMethodLive
		}
		st.Method, st.To, st.StartTime = method, target, &now
		to = target
		if method == fleetv1alpha1.MoveMethodLive {
			st.Phase, st.Message = fleetv1alpha1.MovePreparing, fmt.Sprintf("preparing the VM on %s to receive it, running, from %s", to, from)
			return live(in, st, now, timeout)
		}
		if method == fleetv1alpha1.MoveMethodCold {
			st.Phase, st.Message = fleetv1alpha1.MoveSwitching, fmt.Sprintf("stopping the VM on %s to copy its disks to %s", from, to)
			return cold(in, st, now, timeout)
		}
		st.Phase, st.Message = fleetv1alpha1.MovePreparing, fmt.Sprintf("preparing the VM, stopped, on %s while %s serves", target, from)
		fallthrough

	case fleetv1alpha1.MovePreparing, fleetv1alpha1.MoveMigrating:
		if st.Method == fleetv1alpha1.MoveMethodLive {
			return live(in, st, now, timeout)
		}
		if in.Deleted {
			return rollBack(deletedMsg)
		}
		if over, _ := deadline(); over {
			return rollBack(fmt.Sprintf("the VM was not prepared on %s within %s (%s)", to, timeout, reported(in.Copies[to])))
		}
		if bad := failed(in.Copies[to]); bad != "" {
			return rollBack(fmt.Sprintf("the VM cannot be prepared on %s: %s", to, bad))
		}
		if !in.Copies[to].stopped(HoldOf(m, st.Phase)) {
			out = Output{Status: st, Target: to, Halt: []string{to}}
			_, out.LookAgain = deadline()
			return out
		}
		st.Phase, st.Message = fleetv1alpha1.MoveSwitching, fmt.Sprintf("stopping the VM on %s", from)
		fallthrough

	case fleetv1alpha1.MoveSwitching, fleetv1alpha1.MoveCopying:
		if st.Method == fleetv1alpha1.MoveMethodCold {
			return cold(in, st, now, timeout)
		}
		if in.Deleted {
			return rollBack(deletedMsg)
		}
		if over, _ := deadline(); over {
			return rollBack(fmt.Sprintf("the VM was not reported stopped on %s within %s (%s)", from, timeout, reported(in.Copies[from])))
		}
		if !in.Copies[from].stopped(HoldOf(m, st.Phase)) {
			out = Output{Status: st, Target: to, Halt: []string{from, to}}
			_, out.LookAgain = deadline()
			return out
		}
		st.Phase, st.StoppedTime = fleetv1alpha1.MoveVerifying, &now
		st.Message = fmt.Sprintf("starting the VM on %s", to)
		fallthrough

	case fleetv1alpha1.MoveVerifying:
		if st.Method == fleetv1alpha1.MoveMethodLive {
			return live(in, st, now, timeout)
		}
		if !arrived(in.Copies[to], in.RunStrategy) {
			// Past the point of no return (a Cold move's VM released
			// to run on the target, whose disks then hold the newest
			// data) the move goes on, whatever the time.
			if noReturn(st, in.RunStrategy) {
				st.Message = fmt.Sprintf("the VM was started on %s, whose disks now hold its newest data: the move goes on, "+
					"and does not roll back, until it is ready there (%s)", to, reported(in.Copies[to]))
				return Output{Status: st, Target: to, Halt: []string{from}, Export: imports(st), Import: imports(st)}
			}
			if in.Deleted {
				return rollBack(deletedMsg)
			}
			if over, _ := deadline(); over {
				return rollBack(fmt.Sprintf("the VM did not become ready on %s within %s (%s)", to, timeout, reported(in.Copies[to])))
			}
			if bad := failed(in.Copies[to]); bad != "" {
				return rollBack(fmt.Sprintf("the VM failed on %s: %s", to, bad))
			}
			out = Output{Status: st, Target: to, Halt: []string{from}, Export: imports(st), Import: imports(st)}
			_, out.LookAgain = deadline()
			return out
		}
		st.Phase, st.ReadyTime = fleetv1alpha1.MoveCompleting, &now
		st.Message = fmt.Sprintf("the VM is ready on %s; removing its copy on %s", to, from)
		fallthrough

	case fleetv1alpha1.MoveCompleting:
		if st.Method == fleetv1alpha1.MoveMethodLive {
			return live(in, st, now, timeout)
		}
		if c := in.Copies[from]; c.Present {
			return Output{Status: st, Target: to, Halt: []string{from}, RemoveFrom: true, Export: imports(st), Import: imports(st)}
		}
		st.Phase, st.CompletionTime = fleetv1alpha1.MoveSucceeded, &now
		st.Message = fmt.Sprintf("the VM runs on %s; its copy on %s is removed", to, from)
		return Output{Status: st}

	case fleetv1alpha1.MoveAborting, fleetv1alpha1.MoveRollingBack:
		return rollingBack(in, st, now)
	}
	return fail(fmt.Sprintf("unknown phase %q", st.Phase))
}

// cold runs the Cold method's own phases: Switching stops the VM on the
// source, whose export (asked from the start: KubeVirt serves it once the
// VM stopped) then serves its disks; Copying creates the VM stopped on the
// target, importing them, until CDI there reports every DataVolume
// imported (not until the VM merely reads Stopped: on storage that binds
// at the first consumer it does before anything is imported). Then
// Verifying starts it there, as for Restart.
func cold(in Input, st fleetv1alpha1.FleetVirtualMachineMoveStatus, now metav1.Time, timeout time.Duration) Output {
	from, to := in.Move.Spec.From, st.To
	left := st.StartTime.Add(timeout).Sub(in.Now)
	rollBack := func(reason string) Output {
		st.Phase, st.Message = fleetv1alpha1.MoveRollingBack, "rolling back: "+reason
		return rollingBack(in, st, now)
	}
	if st.Phase == fleetv1alpha1.MoveSwitching {
		switch {
		case in.Deleted:
			return rollBack("the move was deleted")
		case left <= 0:
			return rollBack(fmt.Sprintf("the VM was not reported stopped on %s within %s (%s)", from, timeout, reported(in.Copies[from])))
		case !in.Copies[from].stopped(HoldOf(in.Move, st.Phase)):
			return Output{Status: st, Halt: []string{from}, Export: true, LookAgain: left}
		}
		st.Phase, st.StoppedTime = fleetv1alpha1.MoveCopying, &now
		st.Message = fmt.Sprintf("exporting the VM's disks on %s", from)
	}
	c, hold := in.Copies[to], HoldOf(in.Move, st.Phase)
	if in.Export.Ready && c.stopped(hold) && c.imported(hold) {
		st.Phase, st.CopiedTime = fleetv1alpha1.MoveVerifying, &now
		st.Message = fmt.Sprintf("starting the VM on %s", to)
		in.Move = withStatus(in.Move, st)
		return step(in)
	}
	switch {
	case in.Deleted:
		return rollBack("the move was deleted")
	case left <= 0:
		return rollBack(fmt.Sprintf("the VM's disks were not copied to %s within %s (%s)", to, timeout, reported(c)))
	case in.Export.Failed != "":
		return rollBack(fmt.Sprintf("the export of the VM's disks on %s failed: %s", from, in.Export.Failed))
	case !in.Export.Ready:
		return Output{Status: st, Halt: []string{from}, Export: true, LookAgain: left}
	}
	if bad := failed(c); bad != "" {
		return rollBack(fmt.Sprintf("the VM's disks cannot be imported on %s: %s", to, bad))
	}
	if c.DataVolumes == fleetv1alpha1.DataVolumesFailed && c.proves(hold) {
		return rollBack(fmt.Sprintf("CDI failed to import the VM's disks on %s", to))
	}
	st.Message = fmt.Sprintf("importing the VM's disks on %s from %s", to, from)
	return Output{Status: st, Target: to, Halt: []string{from, to}, Export: true, Import: true, LookAgain: left}
}

// live runs the Live method: Preparing delivers the VM to the target as
// the receiver (WaitAsReceiver, blank disks) while the source, held
// Manual, serves; once KubeVirt there waits for it, the target's
// migration is made, and once that reports its synchronization address
// the source's, which connects to it. Migrating ends when both report
// Succeeded: KubeVirt stopped the source and runs the VM on the target.
// From then on the move does not roll back (the VM ran on the target; the
// source's disks are behind), and there is no deadline: it waits for the
// target to report ready, then removes the source's copy.
//
// Once the source's migration exists, only KubeVirt's outcome decides:
// Succeeded goes on, whenever the hub sees it; Failed rolls back (the
// source kept its instance). Neither the deadline nor a deletion releases
// or removes anything before that: KubeVirt ends every migration (its
// progress and completion timeouts), and until then either copy may hold
// the running VM.
func live(in Input, st fleetv1alpha1.FleetVirtualMachineMoveStatus, now metav1.Time, timeout time.Duration) Output {
	from, to := in.Move.Spec.From, st.To
	left := st.StartTime.Add(timeout).Sub(in.Now)
	mig := in.Migration
	holds := map[string]fleetv1alpha1.RunStrategy{from: fleetv1alpha1.RunStrategyManual, to: RunStrategyWaitAsReceiver}
	rollBack := func(reason string) Output {
		st.Phase, st.Message = fleetv1alpha1.MoveAborting, "rolling back: "+reason
		return rollingBack(in, st, now)
	}
	switch st.Phase {
	case fleetv1alpha1.MovePreparing:
		c := in.Copies[to]
		switch {
		case in.Deleted:
			return rollBack("the move was deleted")
		case left <= 0:
			return rollBack(fmt.Sprintf("the VM did not wait as the receiver on %s within %s (%s)", to, timeout, reported(c)))
		case failed(c) != "":
			return rollBack(fmt.Sprintf("the VM cannot wait as the receiver on %s: %s", to, failed(c)))
		case mig.Failed != "":
			return rollBack("the live migration failed: " + mig.Failed)
		case !c.Reported || c.PrintableStatus != printableWaitingForReceiver:
			return Output{Status: st, Target: to, Holds: holds, Blank: true, LookAgain: left}
		case mig.ReceiverAddress == "":
			return Output{Status: st, Target: to, Holds: holds, Blank: true, Receive: true, LookAgain: left}
		case !manual(in.Copies[from], HoldOf(in.Move, st.Phase)):
			// Once the migration moved it, KubeVirt restarts a source
			// still under the fleet's run strategy: the source must
			// prove its Manual hold first.
			st.Message = fmt.Sprintf("preparing the VM on %s to receive it: waiting for %s to report the VM held Manual", to, from)
			return Output{Status: st, Target: to, Holds: holds, Blank: true, Receive: true, LookAgain: left}
		}
		st.Phase, st.Message = fleetv1alpha1.MoveMigrating, fmt.Sprintf("migrating the VM, running, from %s to %s", from, to)
		fallthrough
	case fleetv1alpha1.MoveMigrating:
		switch {
		case mig.succeeded():
		case mig.Failed != "":
			return rollBack("the live migration failed: " + mig.Failed)
		case left <= 0:
			return rollBack(fmt.Sprintf("the live migration did not end within %s", timeout))
		case in.Deleted:
			return rollBack("the move was deleted")
		default:
			return Output{Status: st, Target: to, Holds: holds, Blank: true, Receive: true, Send: true, LookAgain: left}
		}
		st.Phase, st.StoppedTime = fleetv1alpha1.MoveVerifying, &now
		st.Message = fmt.Sprintf("the VM migrated to %s; waiting for it to report ready there", to)
		fallthrough
	case fleetv1alpha1.MoveVerifying:
		if !arrived(in.Copies[to], in.RunStrategy) {
			return Output{Status: st, Target: to, Halt: []string{from}, Blank: true, Receive: true, Send: true}
		}
		st.Phase, st.ReadyTime = fleetv1alpha1.MoveCompleting, &now
		st.Message = fmt.Sprintf("the VM is ready on %s; removing its copy on %s", to, from)
		fallthrough
	case fleetv1alpha1.MoveCompleting:
		if in.Copies[from].Present {
			return Output{Status: st, Target: to, Halt: []string{from}, RemoveFrom: true, Blank: true, Receive: true, Send: true}
		}
		st.Phase, st.CompletionTime = fleetv1alpha1.MoveSucceeded, &now
		st.Message = fmt.Sprintf("the VM runs on %s; its copy on %s is removed", to, from)
		return Output{Status: st}
	}
	return Output{Status: st}
}

// offering says which of the clusters offer live migration.
func offering(live map[string]bool, clusters ...string) string {
	var parts []string
	for _, c := range clusters {
		if live[c] {
			parts = append(parts, c+" does")
		} else {
			parts = append(parts, c+" does not")
		}
	}
	return strings.Join(parts, ", ")
}

// withStatus is m with status st.
func withStatus(m *fleetv1alpha1.FleetVirtualMachineMove, st fleetv1alpha1.FleetVirtualMachineMoveStatus) *fleetv1alpha1.FleetVirtualMachineMove {
	m = m.DeepCopy()
	m.Status = st
	return m
}

// imports tells whether the target's VM is rendered importing its disks
// from the source's export, and the export kept for it: from the Cold
// copy on, until the move ends, so that Argo CD never sees the
// definition change under a running move. The source is stopped the
// whole time; a rollback ends the export first.
func imports(st fleetv1alpha1.FleetVirtualMachineMoveStatus) bool {
	return st.Method == fleetv1alpha1.MoveMethodCold
}

// released tells whether the target's VM may have been started: once the
// source stopped (Restart), once the disks were copied (Cold).
func released(st fleetv1alpha1.FleetVirtualMachineMoveStatus) bool {
	if st.Method == fleetv1alpha1.MoveMethodCold {
		return st.CopiedTime != nil
	}
	return st.StoppedTime != nil
}

// noReturn tells whether a move is past its point of no return: a Cold
// move whose VM was released to run on the target (the fleet runs it):
// from its first instance there, the target's disks hold the newest data,
// and a rollback would remove them.
func noReturn(st fleetv1alpha1.FleetVirtualMachineMoveStatus, rs fleetv1alpha1.RunStrategy) bool {
	return st.Method == fleetv1alpha1.MoveMethodCold && released(st) && rs != fleetv1alpha1.RunStrategyHalted
}

// rollingBack holds the target's copy stopped and removes it (a Cold
// move's export ends with the phase); the source stays stopped until the
// target's copy is proven not to run (it may have started once released:
// a report observed under the rollback's own hold, from an available
// cluster), then starts again.
func rollingBack(in Input, st fleetv1alpha1.FleetVirtualMachineMoveStatus, now metav1.Time) Output {
	from, to := in.Move.Spec.From, st.To
	if st.Method == fleetv1alpha1.MoveMethodLive {
		out, wait := liveAborting(in, st, now)
		if wait {
			return out
		}
		st.Phase = fleetv1alpha1.MoveRollingBack
	}
	c := in.Copies[to]
	mayRun := released(st) && c.Present && !c.stopped(HoldOf(in.Move, st.Phase))
	if mayRun {
		return Output{Status: st, Target: to, Halt: []string{from, to}}
	}
	if c.Present {
		return Output{Status: st, Target: to, Halt: []string{to}, RemoveTo: true}
	}
	st.Phase, st.CompletionTime = fleetv1alpha1.MoveFailed, &now
	st.Message = fmt.Sprintf("%s; the VM stays on %s", trimRollingBack(st.Message), from)
	return Output{Status: st}
}

// liveAborting is a Live rollback's first parts. Aborting: the
// migrations' works go (deleting a migration aborts it) while the source
// stays held Manual and the target as the receiver; nothing is released
// or removed. Once they are gone, RollingBack, under a hold of its own
// delivered only from then on: a cluster proves where the VM runs by a
// report observed under it, so after no migration could move the VM any
// more. Proof that it still runs on the source, or does not run on the
// target, lets the rollback go on as any other (wait false); proof that
// it runs on the target, stopped on the source, or a migration found
// Succeeded, goes on with the move instead.
func liveAborting(in Input, st fleetv1alpha1.FleetVirtualMachineMoveStatus, now metav1.Time) (Output, bool) {
	from, to := in.Move.Spec.From, st.To
	moved := func(msg string) (Output, bool) {
		st.Phase, st.StoppedTime = fleetv1alpha1.MoveVerifying, &now
		st.Message = msg
		in.Move = withStatus(in.Move, st)
		return step(in), true
	}
	if in.Migration.succeeded() {
		return moved(fmt.Sprintf("the VM migrated to %s after all; waiting for it to report ready there", to))
	}
	holds := map[string]fleetv1alpha1.RunStrategy{from: fleetv1alpha1.RunStrategyManual, to: RunStrategyWaitAsReceiver}
	msg := trimRollingBack(st.Message)
	if i := strings.Index(msg, "; waiting for"); i >= 0 {
		msg = msg[:i]
	}
	if st.Phase == fleetv1alpha1.MoveAborting {
		if in.Migration != (Migration{}) {
			st.Message = fmt.Sprintf("rolling back: %s; waiting for the migrations to go before anything is released or removed", msg)
			return Output{Status: st, Target: to, Holds: holds, Blank: true}, true
		}
		st.Phase = fleetv1alpha1.MoveRollingBack
	}
	hold := HoldOf(in.Move, st.Phase)
	src, tgt := in.Copies[from], in.Copies[to]
	srcRuns := src.proves(hold) && src.Ready
	tgtIdle := !tgt.Present || tgt.proves(hold) && !tgt.Ready &&
		(tgt.PrintableStatus == printableWaitingForReceiver || tgt.PrintableStatus == printableStopped)
	switch {
	case srcRuns || tgtIdle:
		return Output{}, false
	case tgt.proves(hold) && tgt.Ready && src.stoppedAs(hold, fleetv1alpha1.RunStrategyManual):
		return moved(fmt.Sprintf("the VM migrated to %s after all (it runs there, stopped on %s); waiting for it to report ready there", to, from))
	}
	st.Message = fmt.Sprintf("rolling back: %s; waiting for %s to report the VM running (or %s not running) before anything is released or removed", msg, from, to)
	return Output{Status: st, Target: to, Holds: holds, Blank: true}, true
}

func trimRollingBack(msg string) string {
	const p = "rolling back: "
	if len(msg) >= len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}

// chooseMethod resolves spec.method against what the VM allows.
func chooseMethod(asked, allowed fleetv1alpha1.MoveMethod, refused string) (fleetv1alpha1.MoveMethod, string) {
	if allowed == "" {
		return "", refused
	}
	if asked == "" || asked == fleetv1alpha1.MoveMethodAuto || asked == allowed {
		return allowed, ""
	}
	return "", fmt.Sprintf("spec.method %s does not fit the VM: it moves by %s", asked, allowed)
}

// arrived tells whether the target reports the VM in the state the fleet
// asks for: ready, or stopped for a fleet held Halted, or under the
// user's hand for Manual.
func arrived(c Copy, rs fleetv1alpha1.RunStrategy) bool {
	if !c.Reported || !c.Available || c.RunStrategy != string(rs) {
		return false
	}
	switch rs {
	case fleetv1alpha1.RunStrategyHalted:
		return c.PrintableStatus == printableStopped
	case fleetv1alpha1.RunStrategyManual:
		return c.PrintableStatus != ""
	default:
		return c.Ready
	}
}

func failed(c Copy) string {
	if c.Reported && slices.Contains(failedStatuses, c.PrintableStatus) {
		return "KubeVirt reports " + c.PrintableStatus
	}
	return ""
}

func reported(c Copy) string {
	if !c.Reported {
		return "its agent reports no VM there"
	}
	s := c.PrintableStatus
	if s == "" {
		s = "no status"
	}
	return "last reported " + s
}
