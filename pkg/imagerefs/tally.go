// Package imagerefs keeps fleet-wide disk-image reference counts from the
// clusters' ImageInventories, in memory, and tells who asked for a count
// when it changes.
//
// Each inventory change costs work proportional to the images that changed
// on that one cluster, however large the fleet: the tally keeps per-cluster
// counts and a running total per image, and a reverse index from image to
// the FleetVirtualMachines whose status shows that image's total.
package imagerefs

import (
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Tally is safe for concurrent use. The zero value is not usable: use New.
type Tally struct {
	mu        sync.RWMutex
	byCluster map[string]map[string]int32
	total     map[string]int32
	// byImage is byCluster the other way: image → cluster → references.
	byImage map[string]map[string]int32
	// watchers maps an image to the keys that observed its total, and
	// watching the other way, so a key can be forgotten.
	watchers map[string]map[types.NamespacedName]struct{}
	watching map[types.NamespacedName][]string
}

// New returns an empty Tally.
func New() *Tally {
	return &Tally{
		byCluster: map[string]map[string]int32{},
		total:     map[string]int32{},
		byImage:   map[string]map[string]int32{},
		watchers:  map[string]map[types.NamespacedName]struct{}{},
		watching:  map[types.NamespacedName][]string{},
	}
}

// Set replaces one cluster's counts (image → referencing VMs; nil or empty
// removes the cluster). It returns the keys that observed an image whose
// total changed, sorted.
func (t *Tally) Set(cluster string, counts map[string]int32) []types.NamespacedName {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.byCluster[cluster]
	changed := map[string]struct{}{}
	for image, n := range old {
		if counts[image] != n {
			changed[image] = struct{}{}
		}
	}
	for image, n := range counts {
		if old[image] != n {
			changed[image] = struct{}{}
		}
	}
	if len(changed) == 0 {
		return nil
	}
	for image := range changed {
		before, after := old[image], counts[image]
		t.total[image] += after - before
		per := t.byImage[image]
		if per == nil {
			per = map[string]int32{}
			t.byImage[image] = per
		}
		if after == 0 {
			delete(per, cluster)
		} else {
			per[cluster] = after
		}
		if len(per) == 0 {
			delete(t.byImage, image)
			delete(t.total, image)
		}
	}
	if len(counts) == 0 {
		delete(t.byCluster, cluster)
	} else {
		t.byCluster[cluster] = maps.Clone(counts)
	}
	var keys []types.NamespacedName
	seen := map[types.NamespacedName]struct{}{}
	for image := range changed {
		for k := range t.watchers[image] {
			if _, ok := seen[k]; !ok {
				seen[k] = struct{}{}
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int {
		if a.Namespace != b.Namespace {
			if a.Namespace < b.Namespace {
				return -1
			}
			return 1
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return keys
}

// Observe returns the fleet-wide totals of the images and records that key
// shows them, replacing what key observed before: a later change of one of
// these totals returns key from Set. Observe(key, nil) forgets key.
func (t *Tally) Observe(key types.NamespacedName, images []string) map[string]int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, image := range t.watching[key] {
		if w := t.watchers[image]; w != nil {
			delete(w, key)
			if len(w) == 0 {
				delete(t.watchers, image)
			}
		}
	}
	if len(images) == 0 {
		delete(t.watching, key)
		return nil
	}
	images = slices.Clone(images)
	slices.Sort(images)
	images = slices.Compact(images)
	t.watching[key] = images
	out := make(map[string]int32, len(images))
	for _, image := range images {
		w := t.watchers[image]
		if w == nil {
			w = map[types.NamespacedName]struct{}{}
			t.watchers[image] = w
		}
		w[key] = struct{}{}
		out[image] = t.total[image]
	}
	return out
}

// Total is the number of VMs referencing the image across the fleet.
func (t *Tally) Total(image string) int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.total[image]
}

// Clusters is the number of clusters where some VM references the image.
func (t *Tally) Clusters(image string) int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return int32(len(t.byImage[image]))
}

// ByCluster returns the image's references per cluster (clusters with none
// are left out).
func (t *Tally) ByCluster(image string) map[string]int32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return maps.Clone(t.byImage[image])
}
