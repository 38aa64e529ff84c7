// Package chart proves the fleetvm-hub Helm chart: it renders with Helm's
// own engine for each way it is meant to be installed, every object it
// renders is accepted by a real API server (server-side apply, dry run,
// strict field validation), its RBAC is least privilege, and, installed on
// a real API server, the permissions it grants are exactly enough for
// fleetvm-hub's leader election and self-managed webhook certificate, run
// as the chart's ServiceAccount.
package chart

import (
	"context"
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
)

var shared *fleetenv.Fleet

// TestMain starts one hub (no spokes, no scheduler) for the package, with
// the namespaces Argo CD would have: its namespace exists before the
// install (the hub's Role for Argo CD's objects goes there).
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet:  fleetenv.Options{NoPlacementController: true},
		Logger: zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)),
		Setup: func(ctx context.Context, f *fleetenv.Fleet) (func() error, error) {
			for _, ns := range []string{"argocd", "openshift-gitops"} {
				if err := f.Hub.EnsureNamespace(ctx, ns); err != nil {
					return nil, err
				}
			}
			shared = f
			return nil, nil
		},
	}))
}

func fleet(t *testing.T) *fleetenv.Fleet {
	t.Helper()
	if shared == nil {
		t.Fatal("fleet not started")
	}
	return shared
}
