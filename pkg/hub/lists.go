package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// itemwiseKinds are the kinds whose informers list item by item
// (itemwiseLists): those the hub caches one or more of per
// FleetVirtualMachine, with the resource their List asks for. Each kind's
// cache transform is idempotent, so running it on the listed items and
// again as the informer stores them changes nothing
// (TestItemwiseTransformsIdempotent): an ApplicationSet's leaves a copy
// it held as it is.
var itemwiseKinds = map[schema.GroupVersionKind]string{
	argoapp.GroupVersion.WithKind("Application"):               "applications",
	argoapp.GroupVersion.WithKind("ApplicationSet"):            "applicationsets",
	fleetv1alpha1.GroupVersion.WithKind("VMReport"):            "vmreports",
	fleetv1alpha1.GroupVersion.WithKind("FleetVirtualMachine"): "fleetvirtualmachines",
}

// itemwiseLists makes the informers of itemwiseKinds fill their caches
// from a List read item by item: the response is decoded from the
// connection one item at a time and each item goes through the kind's
// cache transform as it is decoded, so only the transformed items are
// kept. client-go reads a List's whole response into one buffer, grown
// as it arrives, and decodes every item whole beside it before the first
// is transformed: a hub restarting with 30,000 Applications held the
// response, 30,000 whole Applications and the cache they fill at once
// (docs/developer-guide/benchmarks.md). The API server answers the same
// List as before, from its watch cache; watches are unchanged.
//
// A kind cached in several namespaces, or cached in one namespace by a
// label or field selector the transform does not know, lists as before.
func itemwiseLists(cfg *rest.Config, scheme *runtime.Scheme, opts *cache.Options) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	codecs := serializer.NewCodecFactory(scheme)
	// One HTTP client for every kind's lister, made on the first List.
	httpClient := sync.OnceValues(func() (*http.Client, error) { return rest.HTTPClientFor(cfg) })
	listers := map[schema.GroupVersionKind]*itemwiseLister{}
	for gvk, resource := range itemwiseKinds {
		obj, err := scheme.New(gvk)
		utilruntime.Must(err)
		namespace, transform, ok := itemwiseScope(gvk, scheme, opts)
		if !ok {
			continue
		}
		l := &itemwiseLister{
			resource: resource, namespace: namespace, transform: transform,
			newItem: func() runtime.Object { return obj.DeepCopyObject() },
		}
		l.client = sync.OnceValues(func() (rest.Interface, error) {
			hc, err := httpClient()
			if err != nil {
				return nil, err
			}
			return apiutil.RESTClientForGVK(gvk, true, false, cfg, codecs, hc)
		})
		listers[gvk] = l
	}
	return func(lw toolscache.ListerWatcher, exemplar runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if gvk, err := apiutil.GVKForObject(exemplar, scheme); err == nil {
			if l := listers[gvk]; l != nil {
				lw = itemwiseListWatch{ListerWatcherWithContext: toolscache.ToListerWatcherWithContext(lw), lister: l}
			}
		}
		return toolscache.NewSharedIndexInformer(lw, exemplar, resync, indexers)
	}
}

// itemwiseScope is where the cache keeps gvk, in one namespace or in all
// (""), and its transform; not ok where the informer's List carries a
// selector or the cache keeps it in several namespaces.
func itemwiseScope(gvk schema.GroupVersionKind, scheme *runtime.Scheme, opts *cache.Options) (namespace string, transform toolscache.TransformFunc, ok bool) {
	transform = opts.DefaultTransform
	if opts.DefaultLabelSelector != nil || opts.DefaultFieldSelector != nil || len(opts.DefaultNamespaces) > 0 {
		return "", nil, false
	}
	for kind, by := range opts.ByObject {
		kindGVK, err := apiutil.GVKForObject(kind, scheme)
		if err != nil {
			continue // a kind of another scheme is not gvk
		}
		if kindGVK != gvk {
			continue
		}
		if by.Label != nil || by.Field != nil || len(by.Namespaces) > 1 {
			return "", nil, false
		}
		for ns, c := range by.Namespaces {
			if c.LabelSelector != nil || c.FieldSelector != nil || c.Transform != nil {
				return "", nil, false
			}
			if ns != cache.AllNamespaces {
				namespace = ns
			}
		}
		if by.Transform != nil {
			transform = by.Transform
		}
	}
	return namespace, transform, true
}

// itemwiseListWatch lists with its lister and watches as the informer
// would have.
type itemwiseListWatch struct {
	toolscache.ListerWatcherWithContext
	lister *itemwiseLister
}

func (lw itemwiseListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

func (lw itemwiseListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return lw.lister.list(ctx, opts)
}

func (lw itemwiseListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.lister.list(context.Background(), opts)
}

// itemwiseLister lists one kind, in one namespace or in all, and decodes
// the response item by item.
type itemwiseLister struct {
	client    func() (rest.Interface, error)
	resource  string
	namespace string
	transform toolscache.TransformFunc
	newItem   func() runtime.Object
}

func (l *itemwiseLister) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	rc, err := l.client()
	if err != nil {
		return nil, err
	}
	req := rc.Get().Resource(l.resource).VersionedParams(&opts, metav1.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeJSON)
	if l.namespace != "" {
		req = req.Namespace(l.namespace)
	}
	start := time.Now()
	body, err := req.Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	out, err := decodeItemwise(body, l.newItem, l.transform)
	if err != nil {
		return nil, err
	}
	// One line per List: each kind's first as the hub starts, and any
	// later one (the informer lists again when its watch cannot resume,
	// a cost a restart at scale should not pay).
	listLog.Info("Listed for the cache", "resource", l.resource, "namespace", l.namespace, "items", len(out.Items),
		"askedResourceVersion", opts.ResourceVersion, "took", time.Since(start).Round(time.Millisecond))
	return out, nil
}

// listLog logs the informers' Lists.
var listLog = ctrl.Log.WithName("cache")

// itemList is a List as decoded item by item: its list metadata and each
// item transformed.
type itemList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []runtime.Object `json:"items"`
}

func (l *itemList) DeepCopyObject() runtime.Object {
	out := &itemList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	out.Items = make([]runtime.Object, len(l.Items))
	for i, item := range l.Items {
		out.Items[i] = item.DeepCopyObject()
	}
	return out
}

// decodeItemwise reads a List response, {"kind":..,"metadata":{..},
// "items":[..]}, from r: the list metadata, and each item decoded into a
// new object as Kubernetes decodes JSON (case-sensitive, integers kept)
// and passed through transform before the next is read.
func decodeItemwise(r io.Reader, newItem func() runtime.Object, transform toolscache.TransformFunc) (*itemList, error) {
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return nil, err
	}
	out := &itemList{}
	var raw json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch key, _ := tok.(string); key {
		case "metadata":
			if err := dec.Decode(&raw); err != nil {
				return nil, err
			}
			if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &out.ListMeta); err != nil {
				return nil, fmt.Errorf("list metadata: %w", err)
			}
		case "items":
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			if tok == nil { // "items": null
				continue
			}
			if d, ok := tok.(json.Delim); !ok || d != '[' {
				return nil, fmt.Errorf("list items: expected an array, got %v", tok)
			}
			for dec.More() {
				if err := dec.Decode(&raw); err != nil {
					return nil, err
				}
				item := newItem()
				if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, item); err != nil {
					return nil, fmt.Errorf("list item %d: %w", len(out.Items), err)
				}
				if transform != nil {
					t, err := transform(item)
					if err != nil {
						return nil, err
					}
					item = t.(runtime.Object)
				}
				out.Items = append(out.Items, item)
			}
			if err := expectDelim(dec, ']'); err != nil {
				return nil, err
			}
		default:
			// kind, apiVersion: the informer knows them.
			if err := dec.Decode(&raw); err != nil {
				return nil, err
			}
		}
	}
	return out, expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("list response: expected %q, got %v", want, tok)
	}
	return nil
}
