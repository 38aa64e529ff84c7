package fleetenv

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/fleetvm/fleetvm/pkg/hub"
)

// DefaultScheme knows every type the fleet holds: fleetvm-hub's types
// (Kubernetes, FleetVM, OCM, Argo CD), plus the ones only tests and spokes
// use: apiextensions, OCM addons, KubeVirt and CDI.
func DefaultScheme() *runtime.Scheme {
	s := hub.Scheme()
	for _, add := range []func(*runtime.Scheme) error{
		apiextensionsv1.AddToScheme,
		addonv1alpha1.Install,
		kubevirtv1.AddToScheme,
		cdiv1beta1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

func clientcmdConfig(name string, cfg *rest.Config) clientcmdapi.Config {
	return clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {
			Server:                   cfg.Host,
			CertificateAuthorityData: cfg.CAData,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{name: {
			ClientCertificateData: cfg.CertData,
			ClientKeyData:         cfg.KeyData,
			Token:                 cfg.BearerToken,
		}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: name}},
		CurrentContext: name,
	}
}

func objectMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

// RestConfigFromKubeconfig loads a kubeconfig file.
func RestConfigFromKubeconfig(path string) (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", path)
}

func newCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{}
}
