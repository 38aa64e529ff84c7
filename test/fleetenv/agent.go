package fleetenv

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	addonagent "open-cluster-management.io/addon-framework/pkg/agent"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/pkg/addon"
)

// AgentHubConfig grants a registered cluster's fleetvm-agent what the
// addon grants it (the Role of addon.AgentHubRules in its cluster
// namespace, bound to its own group) and returns the credentials of the
// identity its registration CSR asks for.
func (f *Fleet) AgentHubConfig(ctx context.Context, cluster string) (*rest.Config, error) {
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addon.AddonName, Namespace: cluster}}
	if err := f.Hub.Client.Create(ctx, mca); err != nil {
		return nil, err
	}
	mc := &clusterv1.ManagedCluster{}
	if err := f.Hub.Client.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(f.Hub.Config)
	if err != nil {
		return nil, err
	}
	if err := addon.PermissionConfig(kube)(mc, mca); err != nil {
		return nil, err
	}
	return f.Hub.AddUser(addon.AgentUser(cluster), addonagent.DefaultGroups(cluster, addon.AddonName)...)
}
