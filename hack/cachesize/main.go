// Command cachesize reports what fleetvm-hub's cache holds per object of
// each kind. It reads the Lists a benchmark wrote once its burst converged
// (hack/bench --cache-dump DIR), decodes every item as the hub's informers
// do (hub.Scheme, then the kind's hub.CacheTransform), keeps them, and
// reads the heap after a garbage collection:
//
//	go run ./hack/cachesize DIR
//
// Per object is the heap the decoded objects hold, with what they add to
// the hub's shared strings (pkg/intern). Each kind is measured in a process
// of its own (the command runs itself per List), so the shared strings,
// and the growth of their table, start empty for each: a string several
// kinds repeat counts once per kind. The informers' store and indexes are
// not counted.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/pkg/hub"
)

// oneFlag makes the command measure one List and print its size as JSON.
const oneFlag = "-one"

func main() {
	if len(os.Args) == 3 && os.Args[1] == oneFlag {
		s, err := measureFile(os.Args[2])
		if err == nil {
			err = json.NewEncoder(os.Stdout).Encode(s)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cachesize:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: cachesize <folder of JSON Lists (hack/bench --cache-dump)>")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "*.json"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no *.json in %s", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cachesize:", err)
		os.Exit(1)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "kind\tobjects\tper object\tall\tJSON per object\t")
	for _, f := range files {
		s, err := measureApart(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cachesize:", err)
			os.Exit(1)
		}
		if s.Objects == 0 {
			continue
		}
		fmt.Fprintf(w, "%s\t%d\t%.2f KiB\t%.2f MiB\t%.2f KiB\t\n", s.Kind, s.Objects,
			s.PerObject/1024, s.PerObject*float64(s.Objects)/(1<<20), s.JSON/1024)
	}
	_ = w.Flush()
}

// measureApart measures the List at path in a process of its own.
func measureApart(path string) (size, error) {
	self, err := os.Executable()
	if err != nil {
		return size{}, err
	}
	cmd := exec.Command(self, oneFlag, path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return size{}, fmt.Errorf("%s: %w", path, err)
	}
	var s size
	return s, json.Unmarshal(out, &s)
}

// size is what the cache holds of the objects of one List.
type size struct {
	Kind    string
	Objects int
	// PerObject is bytes of heap per decoded object; JSON, bytes of JSON
	// per object as listed.
	PerObject, JSON float64
}

func measureFile(path string) (size, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return size{}, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return size{}, fmt.Errorf("%s: %w", path, err)
	}
	s, err := measure(list.Items, nil)
	if err != nil {
		return size{}, fmt.Errorf("%s: %w", path, err)
	}
	if s.Objects > 0 {
		s.JSON = float64(len(data)) / float64(s.Objects)
	}
	return s, nil
}

// measure decodes items as the hub's cache does, or with transform
// instead of the hub's when one is given, and returns the heap they hold.
func measure(items []json.RawMessage, transform toolscache.TransformFunc) (size, error) {
	if len(items) == 0 {
		return size{}, nil
	}
	heap, kind, err := heapOf(items, transform)
	if err != nil {
		return size{}, err
	}
	return size{Kind: kind, Objects: len(items), PerObject: heap / float64(len(items))}, nil
}

var decoder = serializer.NewCodecFactory(hub.Scheme()).UniversalDeserializer()

// heapOf is the heap the decoded items hold, after a collection.
func heapOf(items []json.RawMessage, transform toolscache.TransformFunc) (float64, string, error) {
	// The decoder's first object of a type fills its caches of the type's
	// fields: decode one and drop it, so that they are not counted.
	first, _, err := decode(items[0])
	if err != nil {
		return 0, "", fmt.Errorf("item 0: %w", err)
	}
	if transform == nil {
		transform = hub.CacheTransform(first)
	}
	if _, err := transform(first); err != nil {
		return 0, "", fmt.Errorf("item 0: %w", err)
	}
	objs := make([]any, len(items))
	before := heapAfterGC()
	kind := ""
	for i, raw := range items {
		obj, k, err := decode(raw)
		if err != nil {
			return 0, "", fmt.Errorf("item %d: %w", i, err)
		}
		kind = k
		if objs[i], err = transform(obj); err != nil {
			return 0, "", fmt.Errorf("item %d: %w", i, err)
		}
	}
	after := heapAfterGC()
	runtime.KeepAlive(objs)
	return float64(after) - float64(before), kind, nil
}

// decode is the object as the hub's informers decode it, and its kind: its
// Go type in the hub's scheme, unstructured for a kind the hub reads so
// (GitOpsCluster).
func decode(raw []byte) (client.Object, string, error) {
	obj, gvk, err := decoder.Decode(raw, nil, nil)
	if kruntime.IsNotRegisteredError(err) {
		u := &unstructured.Unstructured{}
		return u, gvk.Kind, u.UnmarshalJSON(raw)
	}
	if err != nil {
		return nil, "", err
	}
	o, ok := obj.(client.Object)
	if !ok {
		return nil, "", fmt.Errorf("%s is not an object", gvk)
	}
	// The informers' decoder leaves a typed object's kind empty.
	o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return o, gvk.Kind, nil
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
