package webhook

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fleetvm/fleetvm/pkg/diskimage"
	"github.com/fleetvm/fleetvm/pkg/validation"
)

// Options configure the webhooks.
type Options struct {
	// ImageNamespace is the namespace on the clusters where disk images
	// are imported (diskimage.DefaultNamespace when empty).
	ImageNamespace string
	// SharedImageNamespaces are the namespaces on the clusters whose
	// disks every team's templates may clone
	// (validation.DefaultSharedImageNamespaces when nil).
	SharedImageNamespaces []string
	// ArgoNamespace is Argo CD's namespace, where AppProjects are
	// ("argocd" when empty).
	ArgoNamespace string
	// LiveReader reads from the API server what the cache does not hold
	// before a FleetVirtualMachine is refused for it (SetupWithManager
	// uses the manager's API reader; nil trusts the cache).
	LiveReader client.Reader
	// HubUser is the user fleetvm-hub acts as: the one user the move
	// webhook lets write a drain's marks on a FleetVirtualMachineMove.
	// Empty: asked of the API server (WhoAmI), by SetupWithManager with
	// the manager's client before it serves, by Register with LiveReader
	// (when it is a client) on the first request that needs it.
	HubUser string
}

func (o Options) argoNamespace() string {
	if o.ArgoNamespace == "" {
		return "argocd"
	}
	return o.ArgoNamespace
}

func (o Options) imageNamespace() string {
	if o.ImageNamespace == "" {
		return diskimage.DefaultNamespace
	}
	return o.ImageNamespace
}

func (o Options) sharedImageNamespaces() []string {
	if o.SharedImageNamespaces == nil {
		return validation.DefaultSharedImageNamespaces()
	}
	return o.SharedImageNamespaces
}

// SetupWithManager registers every FleetVM webhook with the manager.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if opts.LiveReader == nil {
		opts.LiveReader = mgr.GetAPIReader()
	}
	if err := (&FleetVirtualMachineValidator{Reader: mgr.GetClient(), LiveReader: opts.LiveReader,
		ArgoNamespace: opts.argoNamespace(), ImageNamespace: opts.imageNamespace(), SharedImageNamespaces: opts.sharedImageNamespaces()}).SetupWithManager(mgr); err != nil {
		return err
	}
	FinalizerAdder{}.register(mgr.GetWebhookServer())
	if opts.HubUser == "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		user, err := WhoAmI(ctx, mgr.GetClient())
		if err != nil {
			return fmt.Errorf("find the user fleetvm-hub acts as, who alone may mark a drain's moves: %w", err)
		}
		opts.HubUser = user
	}
	hub := opts.HubUser
	if err := (&MoveValidator{HubUser: func(context.Context) (string, error) { return hub, nil }}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&FleetDiskImageValidator{Reader: mgr.GetClient(), ImageNamespace: opts.imageNamespace()}).setupWithManager(mgr)
}

// Register serves the FleetVirtualMachine webhooks (the validator and the
// finalizer) and the FleetVirtualMachineMove webhook on a server without
// a manager: the test environment and the local fleet use it. reader
// must index FleetVirtualMachines by vmclaim.IndexVM (a cache set up with
// vmclaim.SetupIndex).
func Register(server webhook.Server, scheme *runtime.Scheme, reader client.Reader, opts Options) {
	(&FleetVirtualMachineValidator{Reader: reader, LiveReader: opts.LiveReader,
		ArgoNamespace: opts.argoNamespace(), ImageNamespace: opts.imageNamespace(), SharedImageNamespaces: opts.sharedImageNamespaces()}).Register(server, scheme)
	FinalizerAdder{}.register(server)
	hub := &hubUser{user: opts.HubUser}
	hub.c, _ = opts.LiveReader.(client.Client)
	(&MoveValidator{HubUser: hub.get}).Register(server, scheme)
}

// RegisterDiskImageGuard serves the FleetDiskImage delete guard on a server
// without a manager; reader reads FleetVirtualMachines and ImageInventories.
func RegisterDiskImageGuard(server webhook.Server, scheme *runtime.Scheme, reader client.Reader, opts Options) {
	(&FleetDiskImageValidator{Reader: reader, ImageNamespace: opts.imageNamespace()}).register(server, scheme)
}
