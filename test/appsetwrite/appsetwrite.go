// Package appsetwrite writes an Application the way Argo CD's
// applicationset-controller writes each Application it generates
// (createOrUpdateInCluster, argo-cd v3.2): with Argo CD's own
// utils.CreateOrUpdate, which patches the Application read with a merge
// patch and no resourceVersion, the fields of the ApplicationSet's
// ignoreApplicationDifferences left out, and the controller's mutation
// of the Application restated here: spec, labels and annotations as
// generated (Argo CD's preserved annotations and the ApplicationSet's
// preservedFields kept), finalizers as generated (post-delete ones kept),
// and the ApplicationSet as controller owner.
//
// It is apart from appsetsim, which renders ApplicationSets with Argo
// CD's generators, so that unit tests can check what the controller does
// to an Application without building those.
package appsetwrite

import (
	"context"
	"errors"
	"strings"

	"github.com/argoproj/argo-cd/v3/applicationset/utils"
	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/argo"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	log "github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// preservedAnnotations are the annotations the applicationset-controller
// keeps on every Application (its defaultPreservedAnnotations).
var preservedAnnotations = []string{
	"notified.notifications.argoproj.io",
	argov1alpha1.AnnotationKeyRefresh,
	argov1alpha1.AnnotationKeyHydrate,
}

// Application creates or updates generated, an Application of appSet, as
// the applicationset-controller does, appSet as it holds it (its cache,
// which may be behind the API server).
func Application(ctx context.Context, c client.Client, appSet *argov1alpha1.ApplicationSet, generated argov1alpha1.Application) (controllerutil.OperationResult, error) {
	generated.Spec = *argo.NormalizeApplicationSpec(&generated.Spec)
	found := &argov1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: generated.Name, Namespace: generated.Namespace},
		TypeMeta:   metav1.TypeMeta{Kind: "Application", APIVersion: argov1alpha1.SchemeGroupVersion.String()},
	}
	// The controller reads the Application through its cache, which
	// gives it its kind (a client's typed read does not): the
	// ignoreApplicationDifferences rules match on the kind.
	cached := interceptor.NewClient(asWatch{c}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			obj.GetObjectKind().SetGroupVersionKind(argov1alpha1.ApplicationSchemaGroupVersionKind)
			return nil
		},
	})
	return utils.CreateOrUpdate(ctx, log.NewEntry(log.StandardLogger()), cached, appSet.Spec.IgnoreApplicationDifferences,
		normalizers.IgnoreNormalizerOpts{}, found, func() error {
			found.Spec = generated.Spec
			if generated.Operation != nil {
				found.Operation = generated.Operation
			}
			annotations, labels := preservedAnnotations, []string(nil)
			if p := appSet.Spec.PreservedFields; p != nil {
				annotations = append(append([]string(nil), p.Annotations...), annotations...)
				labels = p.Labels
			}
			for _, key := range annotations {
				if v, ok := found.Annotations[key]; ok {
					if generated.Annotations == nil {
						generated.Annotations = map[string]string{}
					}
					generated.Annotations[key] = v
				}
			}
			for _, key := range labels {
				if v, ok := found.Labels[key]; ok {
					if generated.Labels == nil {
						generated.Labels = map[string]string{}
					}
					generated.Labels[key] = v
				}
			}
			for _, f := range found.Finalizers {
				if strings.HasPrefix(f, argov1alpha1.PostDeleteFinalizerName) {
					generated.Finalizers = append(generated.Finalizers, f)
				}
			}
			found.Annotations = generated.Annotations
			found.Finalizers = generated.Finalizers
			found.Labels = generated.Labels
			return controllerutil.SetControllerReference(appSet, found, c.Scheme())
		})
}

// asWatch is a client.WithWatch of a client that is not one (the
// interceptor wraps only those); nothing here watches.
type asWatch struct{ client.Client }

func (asWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("appsetwrite: no watch")
}
