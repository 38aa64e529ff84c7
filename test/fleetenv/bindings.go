package fleetenv

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	clusterclient "open-cluster-management.io/api/client/cluster/clientset/versioned"
	clusterinformers "open-cluster-management.io/api/client/cluster/informers/externalversions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runBindingStandIn marks ManagedClusterSetBindings Bound as they appear:
// the one job of the OCM registration hub controller that the placement
// scheduler depends on (it ignores unbound bindings). It stands in for that
// controller, which the fleet does not run.
func runBindingStandIn(ctx context.Context, cfg *rest.Config, c client.Client) error {
	cs, err := clusterclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := clusterinformers.NewSharedInformerFactory(cs, 10*time.Minute)
	mark := func(obj any) {
		if m, ok := obj.(interface{ GetNamespace() string }); ok {
			_ = MarkBindingsBound(ctx, c, m.GetNamespace())
		}
	}
	_, err = factory.Cluster().V1beta2().ManagedClusterSetBindings().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    mark,
		UpdateFunc: func(_, obj any) { mark(obj) },
	})
	if err != nil {
		return err
	}
	// A set created after its binding binds it too.
	_, err = factory.Cluster().V1beta2().ManagedClusterSets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			bindings, _ := factory.Cluster().V1beta2().ManagedClusterSetBindings().Lister().List(everything())
			for _, b := range bindings {
				mark(b)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	return nil
}

func everything() labels.Selector { return labels.Everything() }
