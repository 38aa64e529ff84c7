package addon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"open-cluster-management.io/addon-framework/pkg/agent"
	operatorv1 "open-cluster-management.io/api/operator/v1"
)

// TestCSRApprover: an agent's CSR is approved only when it asks for the
// agent identity of the cluster and was filed by that cluster's own
// registration agent: not by cluster prod-ab's for prod-a (a shared name
// prefix), not by another user, not for another identity.
func TestCSRApprover(t *testing.T) {
	request := func(cluster string) []byte {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{
			CommonName: AgentUser(cluster), Organization: agent.DefaultGroups(cluster, AddonName),
		}}, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	registration := func(cluster string) (string, []string) {
		return "system:open-cluster-management:" + cluster + ":agent-7f3c",
			[]string{"system:open-cluster-management:managed-clusters", "system:open-cluster-management:" + cluster, "system:authenticated"}
	}
	csr := func(forCluster, byUser string, groups []string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "addon-" + forCluster},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request: request(forCluster), SignerName: certificatesv1.KubeAPIServerClientSignerName,
				Username: byUser, Groups: groups,
			},
		}
	}
	userA, groupsA := registration("prod-a")
	userAB, groupsAB := registration("prod-ab")
	grpc := csr("prod-a", grpcServiceAccount, nil)
	grpc.Annotations = map[string]string{operatorv1.CSRUsernameAnnotation: userA}
	grpcAB := csr("prod-a", grpcServiceAccount, nil)
	grpcAB.Annotations = map[string]string{operatorv1.CSRUsernameAnnotation: userAB}
	cases := map[string]struct {
		csr  *certificatesv1.CertificateSigningRequest
		want bool
	}{
		"prod-a's registration agent, for prod-a":      {csr("prod-a", userA, groupsA), true},
		"prod-ab's registration agent, for prod-a":     {csr("prod-a", userAB, groupsAB), false},
		"prod-ab's user with prod-a's group claimed":   {csr("prod-a", userAB, groupsA), false},
		"prod-a's user name without prod-a's group":    {csr("prod-a", userA, groupsAB), false},
		"a user named like the cluster, nothing after": {csr("prod-a", "system:open-cluster-management:prod-a", groupsA), false},
		"a nested name": {csr("prod-a", "system:open-cluster-management:prod-a:x:y", groupsA), false},
		"prod-a's agent asking for prod-ab's identity, for prod-a": {csr("prod-ab", userA, groupsA), false},
		"over OCM's gRPC server, for prod-a's registration agent":  {grpc, true},
		"over OCM's gRPC server, for prod-ab's registration agent": {grpcAB, false},
		"someone else": {csr("prod-a", "alice", []string{"system:authenticated"}), false},
	}
	approve := CSRApprover()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := approve(testCluster("prod-a"), testAddon("prod-a", ""), tc.csr); got != tc.want {
				t.Errorf("approved = %v, want %v", got, tc.want)
			}
		})
	}
}
