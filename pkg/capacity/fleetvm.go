package capacity

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmtemplate"
)

// ShapeOf returns the shape of a FleetVirtualMachine's VM: for an inline VM,
// its CPU, memory and Multus networks plus spec.placement.requiredNetworks;
// for a VM from git, which the hub cannot read, only the required
// networks (none: no shape, nothing to fit).
func ShapeOf(fvm *fleetv1alpha1.FleetVirtualMachine) (Shape, bool) {
	if fvm.DeletionTimestamp != nil {
		return Shape{}, false
	}
	required := fvm.Spec.Placement.RequiredNetworks
	if fvm.Spec.Template == nil {
		if len(required) == 0 {
			return Shape{}, false
		}
		return Shape{Networks: Networks(fvm.Namespace, required...)}, true
	}
	vm, errs := vmtemplate.Decode(fvm.Spec.Template.Raw, field.NewPath("spec", "template"))
	if vm == nil || len(errs) > 0 {
		return Shape{}, false
	}
	mem, ok := vmtemplate.Memory(vm)
	if !ok {
		return Shape{}, false
	}
	return Shape{
		CPU: vmtemplate.CPU(vm), Memory: mem,
		Networks: Networks(fvm.Namespace, append(vmtemplate.Networks(vm), required...)...),
	}, true
}

// ScoreValues returns the values of a fleetvm-capacity score by name; nil
// for no score. It reads the score whatever its validUntil, as OCM's CEL
// scores() does: the hub's pick reads ValidScoreValues (Scores).
func ScoreValues(score *clusterv1alpha1.AddOnPlacementScore) map[string]int32 {
	if score == nil {
		return nil
	}
	out := make(map[string]int32, len(score.Status.Scores))
	for _, s := range score.Status.Scores {
		out[s.Name] = s.Value
	}
	return out
}

// Expired tells whether a score's validUntil has come by now: the agent
// stopped renewing it (it is gone, or cannot reach the hub), so its
// values say nothing about the cluster any more. A score without
// validUntil never expires.
func Expired(score *clusterv1alpha1.AddOnPlacementScore, now time.Time) bool {
	return score != nil && score.Status.ValidUntil != nil && !now.Before(score.Status.ValidUntil.Time)
}

// ValidScoreValues is ScoreValues for a score that has not expired by now,
// and nil (no score: nothing fits) for one that has.
// It is Score.Valid, which the hub's pick reads through Scores.
func ValidScoreValues(score *clusterv1alpha1.AddOnPlacementScore, now time.Time) map[string]int32 {
	if score == nil {
		return nil
	}
	return scoreOf(score).Valid(now)
}

// DefaultShapesPerNamespace is how many distinct VM shapes the
// FleetVirtualMachines of one namespace may add, by default, to the shapes
// every cluster's agent reads and scores (the fleetvm-shapes ConfigMaps).
const DefaultShapesPerNamespace = 50

// FleetShapes are the shapes the fleet asks the agents to score, and the
// FleetVirtualMachines left out because their namespace would add more
// than its share.
type FleetShapes struct {
	// Shapes are the shapes of the FleetVirtualMachines not over their
	// namespace's limit, once per namespace (a shape two namespaces ask
	// for comes twice: EncodeShapes keeps one).
	Shapes []Shape
	// Over maps each FleetVirtualMachine whose shape is left out to the
	// reason, for its status.
	Over map[types.NamespacedName]string
}

// Shapes decides which shapes of fvms the agents score: in each
// namespace, the FleetVirtualMachines in order of creation (then name)
// add their shape until the namespace has limit distinct shapes
// (DefaultShapesPerNamespace when limit < 1); a later one whose shape is
// not among them is left out, one whose shape is keeps it. So the oldest
// keep theirs, and a namespace cannot crowd out another's. The hub's
// shapes controller writes what this returns for the whole fleet; the
// FleetVirtualMachine controller asks it about one namespace, whose
// answer depends only on that namespace's FleetVirtualMachines.
func Shapes(fvms []fleetv1alpha1.FleetVirtualMachine, limit int) FleetShapes {
	return ShapesOf(fvms, limit, ShapeOf)
}

// ShapesOf is Shapes with the shape of each FleetVirtualMachine from of
// (a ShapeCache's Of, which decodes each template once per generation).
func ShapesOf(fvms []fleetv1alpha1.FleetVirtualMachine, limit int, of func(*fleetv1alpha1.FleetVirtualMachine) (Shape, bool)) FleetShapes {
	if limit < 1 {
		limit = DefaultShapesPerNamespace
	}
	type entry struct {
		fvm   *fleetv1alpha1.FleetVirtualMachine
		shape Shape
	}
	entries := make([]entry, 0, len(fvms))
	for i := range fvms {
		if s, ok := of(&fvms[i]); ok {
			entries = append(entries, entry{&fvms[i], s})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.fvm.Namespace, b.fvm.Namespace); c != 0 {
			return c
		}
		if c := a.fvm.CreationTimestamp.Compare(b.fvm.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.fvm.Name, b.fvm.Name)
	})
	out := FleetShapes{Over: map[types.NamespacedName]string{}}
	var ns string
	var names map[string]bool
	for _, e := range entries {
		if e.fvm.Namespace != ns || names == nil {
			ns, names = e.fvm.Namespace, map[string]bool{}
		}
		name := e.shape.Name()
		if !names[name] && len(names) >= limit {
			out.Over[types.NamespacedName{Namespace: e.fvm.Namespace, Name: e.fvm.Name}] = fmt.Sprintf(
				"namespace %s already asks for %d distinct VM shapes (CPU, memory and networks), the most one namespace may add to the shapes every cluster scores; this VM's shape %s would be one more, so no cluster is shown to fit it: give it the CPU, memory and networks of another FleetVirtualMachine of the namespace, or delete one of another shape",
				ns, limit, name)
			continue
		}
		if !names[name] {
			// One per name and namespace: EncodeShapes keeps one per
			// name, and a hub of 10,000 FleetVMs has a few shapes.
			names[name] = true
			out.Shapes = append(out.Shapes, e.shape)
		}
	}
	return out
}

// ShapeCache remembers the shape of each FleetVirtualMachine for its
// generation (a spec change makes a new one; deletion, none), so a
// question about a whole namespace decodes each VM template once, not on
// every reconcile of every FleetVirtualMachine in it. Safe for concurrent
// use.
type ShapeCache struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]cachedShape
	// names counts, per namespace, the FleetVirtualMachines of each shape
	// among the entries (Distinct), with the shape (Fleet).
	names map[string]map[string]shapeCount
}

// shapeCount is how many entries of a namespace have a shape, and the
// shape they share.
type shapeCount struct {
	n     int
	shape *namedShape
}

// namedShape is a shape with its name, held once per namespace and name
// however many FleetVirtualMachines ask for it: a hub of 10,000 has a
// few shapes. With a copy in every entry, the hub's two shape caches held
// 5.1 MB in the heap profile of 10,000 FleetVMs; 4.3 MB shared, the rest
// being the entries' maps.
type namedShape struct {
	shape Shape
	name  string // shape.Name() when ok
}

type cachedShape struct {
	uid        types.UID
	generation int64
	deleting   bool
	ok         bool
	// observed: Observe put it there (the informer's event handler).
	observed bool
	// shape is shared with the namespace's other entries of its name
	// when ok.
	shape *namedShape
}

// is tells whether the entry is fvm's shape as it is: the same object, at
// the same generation, being deleted or not.
func (e cachedShape) is(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	return e.uid == fvm.UID && e.generation == fvm.Generation && e.deleting == (fvm.DeletionTimestamp != nil)
}

// Of returns ShapeOf(fvm), from the cache when fvm's generation was seen.
func (c *ShapeCache) Of(fvm *fleetv1alpha1.FleetVirtualMachine) (Shape, bool) {
	return c.of(fvm, false)
}

// Observe records fvm as the informer's event handler delivers it: every
// FleetVirtualMachine, in the order the API server wrote them.
func (c *ShapeCache) Observe(fvm *fleetv1alpha1.FleetVirtualMachine) { c.of(fvm, true) }

// Observed tells whether Observe has recorded fvm as it is (its UID and
// generation): then it has recorded every FleetVirtualMachine written
// before it too.
func (c *ShapeCache) Observed(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[types.NamespacedName{Namespace: fvm.Namespace, Name: fvm.Name}]
	return ok && e.observed && e.uid == fvm.UID && e.generation == fvm.Generation
}

func (c *ShapeCache) of(fvm *fleetv1alpha1.FleetVirtualMachine, observed bool) (Shape, bool) {
	key := types.NamespacedName{Namespace: fvm.Namespace, Name: fvm.Name}
	deleting := fvm.DeletionTimestamp != nil
	c.mu.Lock()
	e, hit := c.entries[key]
	c.mu.Unlock()
	if hit && e.is(fvm) && (e.observed || !observed) {
		return e.shape.shape, e.ok
	}
	var shape Shape
	var ok bool
	if hit && e.is(fvm) {
		shape, ok = e.shape.shape, e.ok // decoded already; now observed too
	} else {
		shape, ok = ShapeOf(fvm)
	}
	e = cachedShape{uid: fvm.UID, generation: fvm.Generation, deleting: deleting, ok: ok, observed: observed}
	var name string
	if ok {
		name = shape.Name()
	} else {
		e.shape = &namedShape{shape: shape}
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[types.NamespacedName]cachedShape{}
		c.names = map[string]map[string]shapeCount{}
	}
	c.drop(key)
	if ok {
		if c.names[key.Namespace] == nil {
			c.names[key.Namespace] = map[string]shapeCount{}
		}
		count := c.names[key.Namespace][name]
		if count.shape == nil {
			count.shape = &namedShape{shape: shape, name: name}
		}
		e.shape = count.shape
		c.names[key.Namespace][name] = shapeCount{n: count.n + 1, shape: count.shape}
	}
	c.entries[key] = e
	c.mu.Unlock()
	return shape, ok
}

// Lookup is Of without remembering: the cached shape when fvm's
// generation was seen, else ShapeOf(fvm). For a reader of a list that
// must not put back what Observe's caller has since let go (Forget).
func (c *ShapeCache) Lookup(fvm *fleetv1alpha1.FleetVirtualMachine) (Shape, bool) {
	c.mu.Lock()
	e, hit := c.entries[types.NamespacedName{Namespace: fvm.Namespace, Name: fvm.Name}]
	c.mu.Unlock()
	if hit && e.is(fvm) {
		return e.shape.shape, e.ok
	}
	return ShapeOf(fvm)
}

// Fleet is Shapes of every FleetVirtualMachine the cache holds, read from
// its counts, for the namespaces with no more than limit distinct shapes
// (DefaultShapesPerNamespace when limit < 1): each of their shapes once.
// The namespaces with more come back in over, sorted: which of their
// shapes count depends on the order their FleetVirtualMachines were
// created in, which the cache does not keep, so the caller asks Shapes
// about each of them. A cache that Observe fills holds every
// FleetVirtualMachine the informer has delivered.
func (c *ShapeCache) Fleet(limit int) (shapes []Shape, over []string) {
	if limit < 1 {
		limit = DefaultShapesPerNamespace
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for ns, names := range c.names {
		if len(names) > limit {
			over = append(over, ns)
			continue
		}
		for _, count := range names {
			shapes = append(shapes, count.shape.shape)
		}
	}
	slices.Sort(over)
	return shapes, over
}

// EventHandler is the FleetVirtualMachine informer's handler that keeps
// the cache: it records each FleetVirtualMachine as the informer delivers
// it (Observe) and forgets the deleted. After each event that may change
// a shape (a creation, a new generation or UID, the start of a deletion,
// a deletion; not a status write) it calls then (nil: nothing).
func (c *ShapeCache) EventHandler(then func()) toolscache.ResourceEventHandlerFuncs {
	done := func() {
		if then != nil {
			then()
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if fvm, ok := obj.(*fleetv1alpha1.FleetVirtualMachine); ok {
				c.Observe(fvm)
				done()
			}
		},
		UpdateFunc: func(old, obj any) {
			after, ok := obj.(*fleetv1alpha1.FleetVirtualMachine)
			if !ok {
				return
			}
			c.Observe(after) // a lookup when it holds this generation
			if before, ok := old.(*fleetv1alpha1.FleetVirtualMachine); ok && before.Generation == after.Generation &&
				before.UID == after.UID && (before.DeletionTimestamp == nil) == (after.DeletionTimestamp == nil) {
				return // a status write: the same shape
			}
			done()
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if fvm, ok := obj.(*fleetv1alpha1.FleetVirtualMachine); ok {
				c.Forget(types.NamespacedName{Namespace: fvm.Namespace, Name: fvm.Name})
				done()
			}
		},
	}
}

// Forget drops what the cache holds for a FleetVirtualMachine that is gone.
func (c *ShapeCache) Forget(key types.NamespacedName) {
	c.mu.Lock()
	c.drop(key)
	c.mu.Unlock()
}

// Retain forgets every FleetVirtualMachine not in keep: for a user that
// lists them all, rather than hearing of each deletion.
func (c *ShapeCache) Retain(keep map[types.NamespacedName]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.entries {
		if !keep[key] {
			c.drop(key)
		}
	}
}

// drop removes key's entry and its count; c.mu is held.
func (c *ShapeCache) drop(key types.NamespacedName) {
	old, had := c.entries[key]
	if !had {
		return
	}
	delete(c.entries, key)
	if !old.ok {
		return
	}
	ns := c.names[key.Namespace]
	if count := ns[old.shape.name]; count.n > 1 {
		ns[old.shape.name] = shapeCount{n: count.n - 1, shape: count.shape}
	} else {
		delete(ns, old.shape.name)
	}
	if len(ns) == 0 {
		delete(c.names, key.Namespace)
	}
}

// Distinct is how many distinct shapes the FleetVirtualMachines of a
// namespace the cache holds ask for. Once Observe has recorded a
// FleetVirtualMachine as it is (Observed), it has recorded every one
// written before it, so no more than the shape limit means that one is
// not over it.
func (c *ShapeCache) Distinct(namespace string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.names[namespace])
}
