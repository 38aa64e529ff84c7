// Package agent is the integration test of the fleetvm agent: a hub and
// two spokes on real API servers, an agent per spoke running in-process
// with the KubeVirt simulator.
package agent

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/agent"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/simulator"
)

var (
	shared *fleetenv.Fleet
	// vmShape is the shape the hub asks the clusters about.
	vmShape = capacity.Shape{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")}
)

const wait = 30 * time.Second

// TestMain starts a hub and two spokes, each with its agent and the
// KubeVirt simulator.
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet: fleetenv.Options{Spokes: []string{"east", "west"}, NoPlacementController: true, Scheme: agenttest.Scheme()},
		Setup: func(ctx context.Context, f *fleetenv.Fleet) (func() error, error) {
			shared = f
			agents, err := startAgents(ctx, f)
			if err != nil {
				return nil, err
			}
			return agents.Wait, nil
		},
	}))
}

// startAgents registers each spoke on the hub, gives it one 8-CPU node,
// publishes the VM shape and runs its agent with the simulator.
func startAgents(ctx context.Context, f *fleetenv.Fleet) (fleetrun.Runners, error) {
	shapes, err := capacity.EncodeShapes([]capacity.Shape{vmShape})
	if err != nil {
		return nil, err
	}
	agents := fleetrun.Runners{}
	for _, s := range f.Spokes {
		if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: s.Name, Labels: map[string]string{"env": "prod"}}); err != nil {
			return nil, err
		}
		if err := f.Hub.Client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Name, Name: fleetv1alpha1.ShapesConfigMapName},
			Data:       map[string]string{fleetv1alpha1.ShapesConfigMapKey: shapes},
		}); err != nil {
			return nil, err
		}
		if _, err := s.CreateNode(ctx, fleetenv.Node{Name: s.Name + "-1", CPU: "8", Memory: "32Gi"}); err != nil {
			return nil, err
		}
		if err := s.EnsureNamespace(ctx, "apps"); err != nil {
			return nil, err
		}
		agents.Go("agent "+s.Name, func() error {
			return agent.Run(ctx, agent.Options{
				ClusterName: s.Name, SpokeConfig: s.Config, HubConfig: f.Hub.Config,
				Logger: agenttest.Logger(), AlsoRun: simulator.RunBeside(0),
				CapacityDebounce: 200 * time.Millisecond,
			})
		})
	}
	return agents, nil
}

func fleet(t *testing.T) *fleetenv.Fleet {
	t.Helper()
	if shared == nil {
		t.Fatal("fleet not started")
	}
	return shared
}
