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
	"fmt"
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

var shared *fleetenv.Fleet

// TestMain starts one hub (no spokes, no scheduler) for the package.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	f, err := fleetenv.Start(context.Background(), fleetenv.Options{NoPlacementController: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := f.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	// Argo CD is a prerequisite of the chart: its namespace exists before
	// the install (the hub's Role for Argo CD's objects goes there).
	for _, ns := range []string{"argocd", "openshift-gitops"} {
		if err := f.Hub.EnsureNamespace(context.Background(), ns); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	shared = f
	return m.Run()
}

func fleet(t *testing.T) *fleetenv.Fleet {
	t.Helper()
	if shared == nil {
		t.Fatal("fleet not started")
	}
	return shared
}
