package fleetenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/openshift/library-go/pkg/controller/controllercmd"
	"k8s.io/client-go/rest"
	ocmfeature "open-cluster-management.io/api/feature"

	commonoptions "open-cluster-management.io/ocm/pkg/common/options"
	ocmfeatures "open-cluster-management.io/ocm/pkg/features"
	workspoke "open-cluster-management.io/ocm/pkg/work/spoke"
)

// workStatusSyncInterval is how often each work agent re-reads the status
// of what it applied and writes conditions and feedback to the hub. The
// agent's default is 10s (with up to 90% jitter); 1s keeps tests that wait
// for feedback short, at a cost that stays small with a few ManifestWorks.
// A ManifestWork that sets feedbackScrapeType Watch gets updates on every
// change instead.
const workStatusSyncInterval = time.Second

// workFeatureGates registers the work agent's feature gates once per
// process. They live in a package variable of OCM (the agent reads them
// there), and Enabled panics on a gate that was never registered.
// RawFeedbackJsonString is on, so a feedback JSONPath that selects an
// object or a list comes back as a JSON string rather than being dropped.
var workFeatureGates = sync.OnceValue(func() error {
	if err := ocmfeatures.SpokeMutableFeatureGate.Add(ocmfeature.DefaultSpokeWorkFeatureGates); err != nil {
		return fmt.Errorf("register OCM work agent feature gates: %w", err)
	}
	if err := ocmfeatures.SpokeMutableFeatureGate.SetFromMap(map[string]bool{string(ocmfeature.RawFeedbackJsonString): true}); err != nil {
		return fmt.Errorf("enable OCM work agent feature gate %s: %w", ocmfeature.RawFeedbackJsonString, err)
	}
	return nil
})

// runWorkAgent runs the real OCM work agent for spoke in-process until ctx
// ends. Call workFeatureGates first.
//
// It is the agent a spoke runs in a real fleet: it watches ManifestWorks in
// the spoke's cluster namespace on the hub, applies their manifests to the
// spoke (recording them in an AppliedManifestWork there), writes the
// Applied and Available conditions and the status feedback back to the
// ManifestWork, and removes what it applied when the ManifestWork is
// deleted.
//
// Credentials: the agent reaches the hub with the hub's admin kubeconfig.
// A real agent uses the narrow identity OCM registration gives it; admin is
// enough for a test environment that runs no registration. The spoke is
// reached with the spoke's admin config, as a real agent's service account
// is cluster-admin on its own cluster.
func runWorkAgent(ctx context.Context, hub, spoke *Cluster) error {
	agentOpts := commonoptions.NewAgentOptions()
	agentOpts.SpokeClusterName = spoke.Name
	agentOpts.AgentID = spoke.Name
	agentOpts.HubKubeconfigFile = hub.Kubeconfig
	agentOpts.HubQPS, agentOpts.HubBurst = 50, 100
	workOpts := workspoke.NewWorkloadAgentOptions()
	workOpts.WorkloadSourceDriver = "kube"
	workOpts.WorkloadSourceConfig = hub.Kubeconfig
	workOpts.StatusSyncInterval = workStatusSyncInterval
	agent := workspoke.NewWorkAgentConfig(agentOpts, workOpts)
	return agent.RunWorkloadAgent(ctx, &controllercmd.ControllerContext{
		// The agent sets QPS and burst on this config: hand it a copy.
		KubeConfig: rest.CopyConfig(spoke.Config),
	})
}
