package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// fleetReader serves a fixed list of FleetVirtualMachines, as the cache
// does to the collector (shared, not copied).
type fleetReader struct {
	client.Reader
	fvms []fleetv1alpha1.FleetVirtualMachine
}

func (r fleetReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if l, ok := list.(*fleetv1alpha1.FleetVirtualMachineList); ok {
		l.Items = r.fvms
	}
	return nil
}

// BenchmarkScrape is one scrape of the collector's series through
// promhttp, gzipped as Prometheus asks, with n FleetVirtualMachines
// running on 3 clusters each: what every read of the hub's /metrics
// costs, growing with the fleet (3 series per FleetVirtualMachine that runs).
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("fleetvms=%d", n), func(b *testing.B) {
			fvms := make([]fleetv1alpha1.FleetVirtualMachine, n)
			for i := range fvms {
				fvms[i].Namespace = fmt.Sprintf("bench-%d", i%10)
				fvms[i].Name = fmt.Sprintf("vm-%05d", i)
				fvms[i].Status.Conditions = []metav1.Condition{{Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
				fvms[i].Status.Summary.Desired, fvms[i].Status.Summary.Ready = 3, 3
				for c := range 3 {
					fvms[i].Status.Clusters = append(fvms[i].Status.Clusters,
						fleetv1alpha1.ClusterStatus{Cluster: fmt.Sprintf("prod-%d", c), Phase: fleetv1alpha1.ClusterPhaseRunning})
				}
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewCollector(fleetReader{fvms: fvms}, logr.Discard()))
			h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				req.Header.Set("Accept-Encoding", "gzip")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("scrape: %d", rec.Code)
				}
			}
		})
	}
}
