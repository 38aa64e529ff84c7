package localfleet

import (
	"fmt"
	"time"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// controllerManagerName is kube-controller-manager's binary in bin/.
const controllerManagerName = "kube-controller-manager"

// gcControllers are the kube-controller-manager controllers the local
// fleet runs on every cluster. envtest starts API servers and etcd only, so
// without them nothing finishes a foreground deletion (Argo CD deletes an
// Application's resources with foreground propagation: the object waits
// for the garbage collector to remove its foregroundDeletion finalizer) or
// empties a deleted namespace. The claim protection controller takes
// kubernetes.io/pvc-protection off a deleted claim no pod uses: in a
// foreground deletion the collector deletes a VM's DataVolume claims while
// the DataVolume waits for them, and without it the VM waits for ever.
var gcControllers = "garbage-collector-controller,namespace-controller,persistentvolumeclaim-protection-controller"

// startControllerManagers runs kube-controller-manager, with the garbage
// collector, namespace and claim protection controllers only, against
// every cluster.
func startControllerManagers(bin, logDir string, clusters []*fleetenv.Cluster) ([]*process, error) {
	if err := requireFiles(bin, controllerManagerName); err != nil {
		return nil, err
	}
	if err := linkNames(bin, "", controllerManagerName); err != nil {
		return nil, err
	}
	var procs []*process
	for _, c := range clusters {
		p, err := startProcess(bin, logDir, controllerManagerName, controllerManagerName+"-"+c.Name, []string{
			"--kubeconfig", c.Kubeconfig,
			"--controllers", gcControllers,
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
		}, nil)
		if err != nil {
			stopAll(procs)
			return nil, fmt.Errorf("kube-controller-manager for %s: %w", c.Name, err)
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func stopAll(procs []*process) {
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(10 * time.Second)
	}
}
