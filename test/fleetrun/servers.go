package fleetrun

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// WatchServers watches the VirtualMachineInstances of namespace ns on one
// spoke, from the spoke's own API server, and calls note for each change:
// the instance, and whether it is a server now. A server is an instance
// that exists, has not ended, and is not the receiver of a live migration
// waiting for it (which serves once the migration completed). note is
// called from the watch's goroutine. WatchServers returns once the watch
// has listed; the watch ends with ctx.
func WatchServers(ctx context.Context, spoke *fleetenv.Cluster, scheme *runtime.Scheme, ns string, note func(vmi *kubevirtv1.VirtualMachineInstance, serves bool)) error {
	c, err := cache.New(spoke.Config, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &kubevirtv1.VirtualMachineInstance{})
	if err != nil {
		return err
	}
	event := func(o any, exists bool) {
		if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o, exists = tomb.Obj, false
		}
		if vmi, ok := o.(*kubevirtv1.VirtualMachineInstance); ok {
			note(vmi, exists && !vmi.IsFinal() && !vmi.IsMigrationTarget())
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { event(o, true) },
		UpdateFunc: func(_, o any) { event(o, true) },
		DeleteFunc: func(o any) { event(o, false) },
	}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("%s: the watch on VirtualMachineInstances did not sync", spoke.Name)
	}
	return nil
}
