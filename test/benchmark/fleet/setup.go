package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// Cluster labels: env (80% prod, 10% staging, 10% dev) and region.
var regions = []string{"us-east", "us-west", "eu-central", "ap-south"}

func clusterName(i int) string { return fmt.Sprintf("cluster-%04d", i+1) }

func clusterLabels(i int) map[string]string {
	env := "prod"
	switch i % 10 {
	case 0:
		env = "dev"
	case 5:
		env = "staging"
	}
	return map[string]string{"env": env, "region": regions[i%len(regions)]}
}

// VM shapes of the fleet, and the disk images the VMs boot from.
var (
	shapes = []struct {
		cores  int
		memory string
	}{{1, "2Gi"}, {2, "4Gi"}, {4, "8Gi"}}
	images = []string{"quay.io/containerdisks/fedora:41", "quay.io/containerdisks/centos-stream:9", "quay.io/containerdisks/ubuntu:24.04"}
)

// newFleetVM is FleetVM i of a namespace: 3 clusters in env=prod, shape
// and image by i.
func newFleetVM(namespace, name string, i, clusters int) *fleetv1alpha1.FleetVirtualMachine {
	shape := shapes[i%len(shapes)]
	vm := map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"kubevirt.io/domain": name}},
			"spec": map[string]any{
				"domain": map[string]any{
					"cpu":    map[string]any{"cores": shape.cores},
					"memory": map[string]any{"guest": shape.memory},
					"devices": map[string]any{
						"disks":      []any{map[string]any{"name": "rootdisk", "disk": map[string]any{"bus": "virtio"}}},
						"interfaces": []any{map[string]any{"name": "default", "masquerade": map[string]any{}}},
					},
				},
				"networks": []any{map[string]any{"name": "default", "pod": map[string]any{}}},
				"volumes":  []any{map[string]any{"name": "rootdisk", "containerDisk": map[string]any{"image": images[(i/len(shapes))%len(images)]}}},
			},
		}},
	}
	raw, err := json.Marshal(vm)
	if err != nil {
		panic(err) // a literal of maps and strings always encodes
	}
	return &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Template:    &runtime.RawExtension{Raw: raw},
			Placement:   fleetv1alpha1.FleetPlacement{Environment: "prod", Clusters: ptr.To(int32(clusters))},
			RunStrategy: fleetv1alpha1.RunStrategyAlways,
		},
	}
}

func (h *harness) registerClusters(ctx context.Context) error {
	start := time.Now()
	if err := fleetenv.EnsureClusterSet(ctx, h.admin, "default"); err != nil {
		return err
	}
	h.clusterNames = make([]string, h.cfg.Clusters)
	for i := range h.clusterNames {
		h.clusterNames[i] = clusterName(i)
	}
	err := fleetenv.Parallel(ctx, h.cfg.Clusters, h.cfg.Concurrency, func(ctx context.Context, i int) error {
		return h.fleet.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: clusterName(i), Labels: clusterLabels(i)})
	})
	if err != nil {
		return err
	}
	h.logf("%d clusters registered in %s", h.cfg.Clusters, time.Since(start).Truncate(time.Millisecond))
	return nil
}

// cacheScope is what the harness watches: FleetVMs, the Argo CD
// namespace's ApplicationSets, Applications and PlacementDecisions, FleetVM's shapes
// ConfigMaps and the capacity scores.
func cacheScope() map[client.Object]cache.ByObject {
	inArgo := map[string]cache.Config{argoNS: {}}
	return map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}:                    {Label: labels.SelectorFromSet(labels.Set{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue})},
		&argov1alpha1.ApplicationSet{}:         {Namespaces: inArgo},
		&argov1alpha1.Application{}:            {Namespaces: inArgo},
		&clusterv1beta1.PlacementDecision{}:    {Namespaces: inArgo},
		&fleetv1alpha1.FleetVirtualMachine{}:   {},
		&clusterv1alpha1.AddOnPlacementScore{}: {},
	}
}

// handle registers add and update handlers of one kind.
func handle[T client.Object](ctx context.Context, c cache.Cache, obj T, fn func(old, cur T)) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if cur, ok := o.(T); ok {
				var zero T
				fn(zero, cur)
			}
		},
		UpdateFunc: func(o, n any) {
			old, ok1 := o.(T)
			cur, ok2 := n.(T)
			if ok1 && ok2 {
				fn(old, cur)
			}
		},
	})
	return err
}

func (h *harness) startLoad(ctx context.Context) error {
	h.agents = newAgents(h, h.gen)
	h.argo = newArgoStandIn(h)
	var errs []error
	errs = append(errs, handle(ctx, h.cache, &fleetv1alpha1.FleetVirtualMachine{}, func(_, cur *fleetv1alpha1.FleetVirtualMachine) {
		h.fvms.observe(keyOf(cur), cur)
		// A candidate Placement is shared: the
		// FleetVM's own stages are when its status names it, and when
		// the hub shows the clusters it picked from it.
		if p := cur.Status.Placement; p != nil && strings.HasPrefix(p.Name, fleetvirtualmachine.CandidatePlacementPrefix) {
			now := time.Now()
			h.stages.at(keyOf(cur), now, func(t *fvmTimes) *time.Time { return &t.placement })
			if len(p.DecidedClusters) > 0 {
				h.stages.at(keyOf(cur), now, func(t *fvmTimes) *time.Time { return &t.decided })
			}
		}
	}))
	errs = append(errs, handle(ctx, h.cache, &clusterv1beta1.Placement{}, func(_, cur *clusterv1beta1.Placement) {
		ns, name := cur.Labels[fleetv1alpha1.LabelFleetVMNamespace], cur.Labels[fleetv1alpha1.LabelFleetVMName]
		if ns == "" || name == "" {
			return
		}
		key := types.NamespacedName{Namespace: ns, Name: name}.String()
		h.placementOwners.Store(cur.Name, key)
		now := time.Now()
		h.stages.at(key, now, func(t *fvmTimes) *time.Time { return &t.placement })
		// The decision may have been seen first.
		if d, ok := h.decisions.get(cur.Name + "-decision-1"); ok && len(d.Status.Decisions) > 0 {
			h.stages.at(key, now, func(t *fvmTimes) *time.Time { return &t.decided })
		}
	}))
	errs = append(errs, handle(ctx, h.cache, &clusterv1beta1.PlacementDecision{}, func(_, cur *clusterv1beta1.PlacementDecision) {
		p := cur.Labels[clusterv1beta1.PlacementLabel]
		if p == "" {
			return
		}
		now := time.Now()
		h.decisions.observe(cur.Name, cur) // OCM's chunks of 100 clusters each
		if key, ok := h.placementOwners.Load(p); ok && len(cur.Status.Decisions) > 0 {
			h.stages.at(key.(string), now, func(t *fvmTimes) *time.Time { return &t.decided })
		}
	}))
	errs = append(errs, handle(ctx, h.cache, &argov1alpha1.ApplicationSet{}, func(_, cur *argov1alpha1.ApplicationSet) {
		h.appSets.observe(cur.Name, cur)
		h.argo.appSetChanged(cur.Name)
	}))
	errs = append(errs, handle(ctx, h.cache, &argov1alpha1.Application{}, func(_, cur *argov1alpha1.Application) {
		h.argo.appChanged(ctx, cur, false)
	}))
	if inf, err := h.cache.GetInformer(ctx, &argov1alpha1.Application{}); err != nil {
		errs = append(errs, err)
	} else if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(o any) {
		if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = tomb.Obj
		}
		if app, ok := o.(*argov1alpha1.Application); ok {
			h.argo.appChanged(ctx, app, true)
		}
	}}); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, handle(ctx, h.cache, &corev1.ConfigMap{}, func(old, cur *corev1.ConfigMap) {
		if cur.Name != fleetv1alpha1.ShapesConfigMapName {
			return
		}
		if old == nil || !equality.Semantic.DeepEqual(old.Data, cur.Data) {
			h.agents.shapesChanged(cur.Namespace)
		}
	}))
	// Scores are read by the agents' capacity reconciler through the cache.
	errs = append(errs, handle(ctx, h.cache, &clusterv1alpha1.AddOnPlacementScore{}, func(_, _ *clusterv1alpha1.AddOnPlacementScore) {
		h.scoreEvents.Add(1)
	}))
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	go func() { _ = h.cache.Start(ctx) }()
	if !h.cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("the harness cache did not sync")
	}
	h.agents.start(ctx, 8)
	h.argo.start(ctx, 10, h.cfg.ArgoRefresh)

	// Every agent publishes its score before the hub starts.
	return fleetenv.Eventually(ctx, h.cfg.Timeout, func() (bool, error) {
		var scores clusterv1alpha1.AddOnPlacementScoreList
		if err := h.cache.List(ctx, &scores); err != nil {
			return false, err
		}
		n := 0
		for _, s := range scores.Items {
			if s.Status.ValidUntil != nil {
				n++
			}
		}
		if n < h.cfg.Clusters {
			return false, fmt.Errorf("%d of %d capacity scores published", n, h.cfg.Clusters)
		}
		return true, nil
	})
}

func (h *harness) startHub(ctx context.Context) error {
	start := time.Now()
	hub, err := startHub(ctx, h.cfg, h.hubKubeconfig, h.webhook, h.cfg.HubLog)
	if err != nil {
		return err
	}
	h.hub = hub
	h.report.Settings.HubArgs = hubArgsForReport(hub.args)
	h.logf("fleetvm-hub (pid %d, %s) ready in %s: %v", hub.pid(), h.report.Settings.HubBuild, time.Since(start).Truncate(time.Millisecond), h.report.Settings.HubArgs)
	return nil
}

// hubArgsForReport leaves out the arguments naming local files and ports.
func hubArgsForReport(args []string) []string {
	var out []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--kubeconfig="), strings.HasPrefix(a, "--metrics-bind-address="), strings.HasPrefix(a, "--health-probe-bind-address="),
			strings.HasPrefix(a, "--pprof-bind-address="), strings.HasPrefix(a, "--webhook-port="), strings.HasPrefix(a, "--webhook-cert-dir="):
			continue
		}
		out = append(out, a)
	}
	return out
}

// seed creates one FleetVM per VM shape before the burst: the fleet
// already runs VMs of these shapes, so the hub lists them in every
// cluster's fleetvm-shapes ConfigMap and every agent scores them. The
// burst then measures FleetVMs of known shapes.
func (h *harness) seed(ctx context.Context) error {
	var waits []<-chan time.Time
	for i := range shapes {
		fvm := newFleetVM(seedNS, fmt.Sprintf("seed-%d", i), i, h.cfg.ClustersPerVM)
		if err := h.admin.Create(ctx, fvm); err != nil {
			return fmt.Errorf("create seed FleetVM: %w", err)
		}
		waits = append(waits, h.fvms.wait(keyOf(fvm), converged))
	}
	if _, err := awaitAll(ctx, waits, h.cfg.Timeout); err != nil {
		return fmt.Errorf("seed FleetVMs not converged: %w", err)
	}
	// Every cluster's score covers every shape.
	want := make([]string, len(shapes))
	for i, s := range shapes {
		want[i] = shapeName(s.cores, s.memory)
	}
	return fleetenv.Eventually(ctx, h.cfg.Timeout, func() (bool, error) {
		var scores clusterv1alpha1.AddOnPlacementScoreList
		if err := h.cache.List(ctx, &scores); err != nil {
			return false, err
		}
		complete := 0
		for _, s := range scores.Items {
			have := map[string]bool{}
			for _, item := range s.Status.Scores {
				have[item.Name] = true
			}
			ok := true
			for _, w := range want {
				ok = ok && have[w]
			}
			if ok {
				complete++
			}
		}
		if complete < h.cfg.Clusters {
			return false, fmt.Errorf("%d of %d clusters score every shape", complete, h.cfg.Clusters)
		}
		return true, nil
	})
}

func shapeName(cores int, memory string) string {
	return capacity.Shape{CPU: *resource.NewQuantity(int64(cores), resource.DecimalSI), Memory: resource.MustParse(memory)}.Name()
}
