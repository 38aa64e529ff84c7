package move

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/workfeedback"
)

// A Live move runs KubeVirt 1.7's decentralized live migration through
// two OCM ManifestWorks, made and removed by the hub with the move:
//
//   - the receive work, on the target, once KubeVirt there waits for the
//     VM (WaitingForReceiver): a VirtualMachineInstanceMigration with
//     spec.receive, whose synchronization address the work agent reports
//     back;
//   - the send work, on the source, then: a VirtualMachineInstanceMigration
//     with spec.sendTo, connecting to that address.
//
// Both share the move's migration ID; the work agent reports each one's
// phase and failure reason (status feedback).

const (
	feedbackAddress = "address"
	feedbackFailure = "failure"

	// resourceMigrations is the resource of the migration, in a
	// migration work.
	resourceMigrations = "virtualmachineinstancemigrations"
)

// ReceiveWorkName and SendWorkName are the names of a Live move's works
// in the target's and source's cluster namespaces.
func ReceiveWorkName(m types.NamespacedName) string { return ExportName(m) + "-receive" }
func SendWorkName(m types.NamespacedName) string    { return ExportName(m) + "-send" }

// MigrationID is the ID both migrations of a Live move share.
func MigrationID(m types.NamespacedName) string { return ExportName(m) }

// migrationWork is a work of one VirtualMachineInstanceMigration of the
// VM vm, with feedback of its phase, failure and (receiver) address.
func migrationWork(m *fleetv1alpha1.FleetVirtualMachineMove, cluster, name string, vm types.NamespacedName, spec kubevirtv1.VirtualMachineInstanceMigrationSpec) (*workv1.ManifestWork, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	mig := &kubevirtv1.VirtualMachineInstanceMigration{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstanceMigration"},
		ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: ExportName(key), Labels: map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}},
		Spec:       spec,
	}
	manifests, err := toManifests(mig)
	if err != nil {
		return nil, err
	}
	return &workv1.ManifestWork{
		ObjectMeta: workMeta(m, cluster, name),
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: manifests},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Group: kubevirtv1.SchemeGroupVersion.Group, Resource: resourceMigrations, Namespace: vm.Namespace, Name: mig.Name},
				FeedbackRules: []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{
					{Name: feedbackPhase, Path: ".status.phase"},
					{Name: feedbackAddress, Path: ".status.synchronizationAddresses[0]"},
					{Name: feedbackFailure, Path: ".status.migrationState.failureReason"},
				}}},
			}},
		},
	}, nil
}

// ReceiveWork is the receive work of Live move m on its target, for the
// VM vm there.
func ReceiveWork(m *fleetv1alpha1.FleetVirtualMachineMove, vm types.NamespacedName) (*workv1.ManifestWork, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	return migrationWork(m, m.Status.To, ReceiveWorkName(key), vm, kubevirtv1.VirtualMachineInstanceMigrationSpec{
		VMIName: vm.Name, Receive: &kubevirtv1.VirtualMachineInstanceMigrationTarget{MigrationID: MigrationID(key)},
	})
}

// SendWork is the send work of Live move m on its source, connecting to
// the target's synchronization address.
func SendWork(m *fleetv1alpha1.FleetVirtualMachineMove, vm types.NamespacedName, address string) (*workv1.ManifestWork, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	return migrationWork(m, m.Spec.From, SendWorkName(key), vm, kubevirtv1.VirtualMachineInstanceMigrationSpec{
		VMIName: vm.Name, SendTo: &kubevirtv1.VirtualMachineInstanceMigrationSource{MigrationID: MigrationID(key), ConnectURL: address},
	})
}

// migrationFeedback reads one migration work's feedback: phase, address
// and failure reason, and why the work agent could not apply it.
func migrationFeedback(work *workv1.ManifestWork) (phase, address, failure, notApplied string) {
	fb := workfeedback.Read(work, resourceMigrations)
	if fb.NotApplied {
		notApplied = "the work agent could not apply the migration: " + fb.NotAppliedMessage
	}
	return fb.Values[feedbackPhase], fb.Values[feedbackAddress], fb.Values[feedbackFailure], notApplied
}

// ReadMigration is a Live move's migration state from its works (nil when
// not made yet).
func ReadMigration(receive, send *workv1.ManifestWork) Migration {
	var out Migration
	rPhase, address, rFailure, rNotApplied := migrationFeedback(receive)
	sPhase, _, sFailure, sNotApplied := migrationFeedback(send)
	out.ReceiverPhase, out.ReceiverAddress, out.SenderPhase = rPhase, address, sPhase
	failed := string(kubevirtv1.MigrationFailed)
	switch {
	case sPhase == failed:
		out.Failed = "the source's migration failed" + suffix(sFailure)
	case rPhase == failed:
		out.Failed = "the target's migration failed" + suffix(rFailure)
	case sNotApplied != "":
		out.Failed = sNotApplied
	case rNotApplied != "":
		out.Failed = rNotApplied
	}
	return out
}
