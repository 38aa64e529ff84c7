package addon

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"open-cluster-management.io/addon-framework/pkg/addonmanager"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/pkg/write"
)

// What the addon manager and EnsureHubObjects need on the hub.
//
// The addon framework: deploy the agent as ManifestWorks, track
// ManagedClusterAddOns, approve the agents' CSRs for the kube-apiserver
// client signer, and give each agent its Role in its cluster namespace
// (escalate and bind on that one Role, so the hub need not hold every
// permission it grants).
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=managedclusteraddons;clustermanagementaddons,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=managedclusteraddons/status;clustermanagementaddons/status,verbs=update;patch
// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=managedclusteraddons/finalizers;clustermanagementaddons/finalizers,verbs=update
// +kubebuilder:rbac:groups=work.open-cluster-management.io,resources=manifestworks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,resourceNames=kubernetes.io/kube-apiserver-client,verbs=approve
// No escalate or bind: Kubernetes lets fleetvm-hub create the agent's Role
// and bind it because fleetvm-hub holds every permission in it (the chart's
// agent-permissions ClusterRole, equal to AgentHubRules). escalate on the
// Role named fleetvm-agent would let whoever holds fleetvm-hub's identity
// write any rule into it and bind it to themselves.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=placements;managedclustersetbindings,verbs=get;create
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclustersets/bind,verbs=create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create

// SetupAddonManager runs the fleetvm addon on the hub: it ensures the hub
// objects (EnsureHubObjects) and starts the addon framework's manager with
// the fleetvm agent addon. It returns once the manager has started; the
// manager runs until ctx is done. Run it on the leader only.
func SetupAddonManager(ctx context.Context, hubConfig *rest.Config, opts Options) error {
	hubKube, err := kubernetes.NewForConfig(hubConfig)
	if err != nil {
		return fmt.Errorf("hub client for the fleetvm addon: %w", err)
	}
	agentAddon, err := NewAgentAddon(hubKube, opts)
	if err != nil {
		return err
	}
	c, err := client.New(hubConfig, client.Options{Scheme: hubScheme()})
	if err != nil {
		return fmt.Errorf("hub client for the fleetvm addon: %w", err)
	}
	if err := EnsureHubObjects(ctx, c, opts); err != nil {
		return err
	}
	mgr, err := addonmanager.New(hubConfig)
	if err != nil {
		return fmt.Errorf("create the addon manager: %w", err)
	}
	if err := mgr.AddAgent(agentAddon); err != nil {
		return fmt.Errorf("add the fleetvm agent addon to the addon manager: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("start the addon manager: %w", err)
	}
	return nil
}

// Run is SetupAddonManager that blocks until ctx is done, for
// controller-runtime's manager.RunnableFunc (which runs it on the leader).
func Run(ctx context.Context, hubConfig *rest.Config, opts Options) error {
	if err := SetupAddonManager(ctx, hubConfig, opts); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// EnsureHubObjects makes the hub match opts: the ClusterManagementAddOn's
// metadata and install strategy are set from opts (the hub setting is the
// source of truth), and with InstallPlacements the Placement, its namespace
// and the ManagedClusterSetBinding it needs are created when missing, but
// never changed: an operator may narrow the Placement.
func EnsureHubObjects(ctx context.Context, c client.Client, opts Options) error {
	cma, err := ClusterManagementAddOn(opts)
	if err != nil {
		return err
	}
	if err := ensureCMA(ctx, c, cma); err != nil {
		return err
	}
	placement, err := DefaultPlacement(opts)
	if err != nil || placement == nil {
		return err
	}
	binding, err := DefaultClusterSetBinding(opts)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: placement.Namespace}}
	for _, obj := range []client.Object{ns, binding, placement} {
		if _, err := write.CreateOnly(ctx, c, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, klog.KObj(obj), err)
		}
	}
	return nil
}

func ensureCMA(ctx context.Context, c client.Client, want *addonv1alpha1.ClusterManagementAddOn) error {
	var got addonv1alpha1.ClusterManagementAddOn
	err := c.Get(ctx, client.ObjectKeyFromObject(want), &got)
	if apierrors.IsNotFound(err) {
		if _, err := write.Ensure(ctx, c, want, nil); err != nil {
			return fmt.Errorf("create ClusterManagementAddOn %s: %w", want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ClusterManagementAddOn %s: %w", want.Name, err)
	}
	// Only what FleetVM defines is set: configuration an operator added to
	// the spec stays.
	if _, err := write.Mutate(ctx, c, &got, func() {
		got.Spec.AddOnMeta = want.Spec.AddOnMeta
		got.Spec.InstallStrategy = want.Spec.InstallStrategy
	}); err != nil {
		return fmt.Errorf("update ClusterManagementAddOn %s: %w", want.Name, err)
	}
	return nil
}

func hubScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, addonv1alpha1.Install, clusterv1beta1.Install, clusterv1beta2.Install,
	} {
		// The Install functions only register types; they fail on
		// programming errors, which tests catch.
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}
