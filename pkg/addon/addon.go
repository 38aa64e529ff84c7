// Package addon wires fleetvm into OCM with the addon framework: the
// fleetvm-agent manifests rendered per managed cluster, the agent's
// registration on the hub (a client certificate through a CSR) and its hub
// permissions, confined to its own cluster namespace; the
// ClusterManagementAddOn that says where the agent is installed; and the
// addon manager that runs all of it inside fleetvm-hub.
package addon

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"open-cluster-management.io/addon-framework/pkg/addonfactory"
	"open-cluster-management.io/addon-framework/pkg/agent"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/fleetvm/fleetvm/manifests"
)

const (
	// AddonName is the name of the addon: of the ClusterManagementAddOn and
	// of every ManagedClusterAddOn.
	AddonName = "fleetvm"
	// AgentName names the agent in its hub identity (see AgentUser) and is
	// the name of its Deployment and ServiceAccount on the cluster.
	AgentName = "fleetvm-agent"
	// DefaultInstallNamespace is where the agent runs on a cluster unless the
	// ManagedClusterAddOn sets spec.installNamespace.
	DefaultInstallNamespace = addonfactory.AddonDefaultInstallNamespace
)

// InstallStrategy says which clusters get the agent.
type InstallStrategy string

const (
	// InstallPlacements installs the agent on the clusters a Placement
	// selects (OCM's addon manager creates the ManagedClusterAddOns).
	InstallPlacements InstallStrategy = InstallStrategy(addonv1alpha1.AddonInstallStrategyPlacements)
	// InstallManual installs the agent only where an operator creates a
	// ManagedClusterAddOn named fleetvm.
	InstallManual InstallStrategy = InstallStrategy(addonv1alpha1.AddonInstallStrategyManual)
)

// Defaults of Options.
const (
	DefaultPlacementNamespace = "open-cluster-management-addon"
	DefaultPlacementName      = "fleetvm-agent"
	DefaultClusterSet         = "global"
)

// Options are the hub settings of the addon.
type Options struct {
	// AgentImage is the image the agent Deployment runs. Required.
	AgentImage string
	// AgentImagePullPolicy; IfNotPresent when empty.
	AgentImagePullPolicy corev1.PullPolicy
	// InstallStrategy; InstallPlacements when empty.
	InstallStrategy InstallStrategy
	// PlacementNamespace and PlacementName name the Placement that selects
	// the clusters with InstallPlacements. Defaults:
	// open-cluster-management-addon/fleetvm-agent.
	PlacementNamespace string
	PlacementName      string
	// ClusterSet is the ManagedClusterSet the default Placement selects all
	// clusters of, when SetupAddonManager has to create it; "global" when
	// empty (OCM's set of every cluster).
	ClusterSet string
}

// withDefaults returns the options with every empty field defaulted, or an
// error when they cannot work.
func (o Options) withDefaults() (Options, error) {
	if o.AgentImagePullPolicy == "" {
		o.AgentImagePullPolicy = corev1.PullIfNotPresent
	}
	if o.InstallStrategy == "" {
		o.InstallStrategy = InstallPlacements
	}
	if o.PlacementNamespace == "" {
		o.PlacementNamespace = DefaultPlacementNamespace
	}
	if o.PlacementName == "" {
		o.PlacementName = DefaultPlacementName
	}
	if o.ClusterSet == "" {
		o.ClusterSet = DefaultClusterSet
	}
	var errs []error
	// The image is written into a YAML template: refuse what could break
	// out of its quoted string.
	if o.AgentImage == "" || strings.ContainsAny(o.AgentImage, " \t\r\n\"'\\{}") {
		errs = append(errs, fmt.Errorf("agent image %q: must be a non-empty image reference", o.AgentImage))
	}
	switch o.AgentImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		errs = append(errs, fmt.Errorf("agent image pull policy %q: must be Always, IfNotPresent or Never", o.AgentImagePullPolicy))
	}
	switch o.InstallStrategy {
	case InstallPlacements, InstallManual:
	default:
		errs = append(errs, fmt.Errorf("install strategy %q: must be %s or %s", o.InstallStrategy, InstallPlacements, InstallManual))
	}
	return o, errors.Join(errs...)
}

// NewAgentAddon returns the fleetvm agent addon for the addon manager.
// hubKube is the hub client PermissionConfig creates the agent's Role and
// RoleBinding with.
func NewAgentAddon(hubKube kubernetes.Interface, opts Options) (agent.AgentAddon, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("fleetvm addon options: %w", err)
	}
	a, err := addonfactory.NewAgentAddonFactory(AddonName, manifests.FS, manifests.AgentDir).
		WithGetValuesFuncs(imageValues(opts)).
		WithAgentRegistrationOption(RegistrationOption(hubKube)).
		// Health from the agent Deployment's availability, reported back
		// through the ManifestWork's status feedback, rather than a Lease:
		// a Lease prober needs the agent to write a Lease on its cluster,
		// and the agent's cluster RBAC is read-only by design. The readiness
		// probe on /readyz makes "available" mean the agent is really ready.
		WithAgentHealthProber(&agent.HealthProber{Type: agent.HealthProberTypeDeploymentAvailability}).
		BuildTemplateAgentAddon()
	if err != nil {
		return nil, fmt.Errorf("build the fleetvm agent addon: %w", err)
	}
	return a, nil
}

// imageValues gives the templates the image settings of the hub.
func imageValues(opts Options) addonfactory.GetValuesFunc {
	return func(*clusterv1.ManagedCluster, *addonv1alpha1.ManagedClusterAddOn) (addonfactory.Values, error) {
		return addonfactory.Values{
			"Image":           opts.AgentImage,
			"ImagePullPolicy": string(opts.AgentImagePullPolicy),
		}, nil
	}
}

// RegistrationOption registers the agent on the hub with a client
// certificate for AgentUser in the groups of agent.DefaultGroups, requested
// by a CSR from its cluster and approved automatically when the CSR asks for
// exactly that identity and comes from that cluster. PermissionConfig grants
// it its hub permissions.
func RegistrationOption(hubKube kubernetes.Interface) *agent.RegistrationOption {
	return &agent.RegistrationOption{
		CSRConfigurations: agent.KubeClientSignerConfigurations(AddonName, AgentName),
		CSRApproveCheck:   CSRApprover(),
		PermissionConfig:  PermissionConfig(hubKube),
	}
}
