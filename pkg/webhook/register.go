package webhook

import (
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// SetupWithManager registers every FleetVM webhook with the manager.
func SetupWithManager(mgr ctrl.Manager) error {
	return (&FleetVirtualMachineValidator{}).SetupWithManager(mgr)
}

// Register serves every FleetVM webhook on a server without a manager: the
// test environment and the local fleet use it.
func Register(server webhook.Server, scheme *runtime.Scheme) {
	(&FleetVirtualMachineValidator{}).Register(server, scheme)
}
