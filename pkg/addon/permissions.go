package addon

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"open-cluster-management.io/addon-framework/pkg/agent"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// AgentHubRoleName is the name of the Role, and of its RoleBinding, that
// PermissionConfig creates in each cluster namespace on the hub.
const AgentHubRoleName = "fleetvm-agent"

// AgentHubRules are everything the agent of a cluster may do on the hub,
// granted only in that cluster's namespace: write its reports and its
// capacity score, and read the VM shapes the hub asks it to score.
func AgentHubRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{
			APIGroups: []string{fleetv1alpha1.GroupVersion.Group},
			Resources: []string{"vmreports", "imageinventories"},
			Verbs:     []string{"create", "get", "list", "watch", "update", "patch", "delete"},
		},
		{
			APIGroups: []string{"cluster.open-cluster-management.io"},
			Resources: []string{"addonplacementscores", "addonplacementscores/status"},
			Verbs:     []string{"get", "list", "watch", "create", "update", "patch"},
		},
		{
			// list and watch with resourceNames are allowed only with the
			// field selector metadata.name=fleetvm-shapes: the agent must
			// watch that one ConfigMap by name.
			APIGroups:     []string{""},
			Resources:     []string{"configmaps"},
			ResourceNames: []string{fleetv1alpha1.ShapesConfigMapName},
			Verbs:         []string{"get", "list", "watch"},
		},
	}
}

// AgentUser is the hub user name of the agent of a cluster: the common name
// of the client certificate it registers with.
func AgentUser(cluster string) string {
	return agent.DefaultUser(cluster, AddonName, AgentName)
}

// AgentGroup is the hub group of the fleetvm agent of one cluster, and the
// only subject of its RoleBinding. The agent's certificate carries two more
// groups, "system:open-cluster-management:addon:fleetvm" (every fleetvm
// agent of every cluster) and "system:authenticated" (everyone): binding
// either would let cluster B's agent write into cluster A's namespace. That
// rules out the framework's BindKubeClientRole, which binds every group of
// the registration subject.
func AgentGroup(cluster string) string {
	return fmt.Sprintf("system:open-cluster-management:cluster:%s:addon:%s", cluster, AddonName)
}

// AgentHubRole is the Role PermissionConfig ensures in a cluster namespace.
func AgentHubRole() *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{
			Name:   AgentHubRoleName,
			Labels: map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue},
		},
		Rules: AgentHubRules(),
	}
}

// PermissionConfig returns the addon's agent.PermissionConfigFunc: in the
// cluster's namespace on the hub it ensures the Role with AgentHubRules and a
// RoleBinding of it to AgentGroup of that cluster, both owned by the
// ManagedClusterAddOn so they go when the addon goes.
func PermissionConfig(hubKube kubernetes.Interface) agent.PermissionConfigFunc {
	return func(cluster *clusterv1.ManagedCluster, addon *addonv1alpha1.ManagedClusterAddOn) error {
		// A new builder per call: the builder's steps set the namespace on
		// the objects they are given, so they must not be shared between
		// clusters.
		apply := utils.NewRBACPermissionConfigBuilder(hubKube).
			BindRoleToGroup(AgentHubRole(), AgentGroup(cluster.Name)).
			Build()
		if err := apply(cluster, addon); err != nil {
			return fmt.Errorf("grant the fleetvm agent of cluster %s its hub permissions in namespace %s: %w", cluster.Name, cluster.Name, err)
		}
		return nil
	}
}
