package addon

import (
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	"open-cluster-management.io/addon-framework/pkg/agent"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	operatorv1 "open-cluster-management.io/api/operator/v1"
)

// grpcServiceAccount is the user that files CSRs for agents registered
// over OCM's gRPC server; the agent's own user is then in an annotation.
const grpcServiceAccount = "system:serviceaccount:open-cluster-management-hub:grpc-server-sa"

// CSRApprover approves an agent's CSR only when it asks for exactly the
// agent identity of its cluster (addon-framework's DefaultCSRApprover) and
// was filed by that cluster's own registration agent, whose hub user is
// "system:open-cluster-management:<cluster>:<agent id>" and who is in the
// group "system:open-cluster-management:<cluster>". The framework checks
// the requester with a plain prefix, so the registration agent of cluster
// "prod-ab" would pass as one of "prod-a" and obtain its certificate.
func CSRApprover() agent.CSRApproveFunc {
	return utils.UnionCSRApprover(utils.DefaultCSRApprover(AgentName), exactRequester)
}

func exactRequester(cluster *clusterv1.ManagedCluster, _ *addonv1alpha1.ManagedClusterAddOn, csr *certificatesv1.CertificateSigningRequest) bool {
	prefix := "system:open-cluster-management:" + cluster.Name + ":"
	user := csr.Spec.Username
	if user == grpcServiceAccount {
		user = csr.Annotations[operatorv1.CSRUsernameAnnotation]
	} else if !slices.Contains(csr.Spec.Groups, "system:open-cluster-management:"+cluster.Name) {
		return false
	}
	id, ok := strings.CutPrefix(user, prefix)
	return ok && id != "" && !strings.Contains(id, ":")
}
