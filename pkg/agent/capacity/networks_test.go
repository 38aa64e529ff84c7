package capacity

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func networkAttachment(ns, name, resourceName string) metav1.PartialObjectMetadata {
	u := metav1.PartialObjectMetadata{}
	u.SetGroupVersionKind(NetworkAttachmentDefinitionGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	if resourceName != "" {
		u.SetAnnotations(map[string]string{AnnotationResourceName: resourceName})
	}
	return u
}

// spoke answers a list of NetworkAttachmentDefinitions with items, or
// with err.
func spoke(err error, items ...metav1.PartialObjectMetadata) client.Client {
	return fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, _ ...client.ListOption) error {
			l, ok := list.(*metav1.PartialObjectMetadataList)
			if !ok || l.GroupVersionKind().Group != NetworkAttachmentDefinitionGVK.Group {
				return errors.New("unexpected list")
			}
			l.Items = items
			return err
		},
	}).Build()
}

// TestReadNetworks: every NetworkAttachmentDefinition with the node
// resource it names; a cluster without Multus has none, and that is not
// an error; any other failure is.
func TestReadNetworks(t *testing.T) {
	ctx := context.Background()
	got, err := ReadNetworks(ctx, spoke(nil,
		networkAttachment("default", "vlan2003", "bridge.network.kubevirt.io/bridge2003"),
		networkAttachment("team-a", "flat", "")))
	if err != nil {
		t.Fatal(err)
	}
	want := Networks{"default/vlan2003": corev1.ResourceName("bridge.network.kubevirt.io/bridge2003"), "team-a/flat": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadNetworks (-want,+got):\n%s", diff)
	}

	noMultus := &meta.NoKindMatchError{GroupKind: NetworkAttachmentDefinitionGVK.GroupKind()}
	if got, err := ReadNetworks(ctx, spoke(noMultus)); err != nil || len(got) != 0 {
		t.Errorf("without Multus: ReadNetworks = %v, %v; want none, no error", got, err)
	}
	if _, err := ReadNetworks(ctx, spoke(errors.New("connection refused"))); err == nil {
		t.Error("a failed list gave no error")
	}
}
