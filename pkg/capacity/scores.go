package capacity

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// Score is what the hub reads of a cluster's capacity score (the agent's
// AddOnPlacementScore fleetvm-capacity in the cluster's namespace).
type Score struct {
	// Found: the cluster has a score.
	Found bool
	// Values by name (ScoreValues). Shared between readers: never change
	// it.
	Values map[string]int32
	// ValidUntil is the score's validUntil; zero: it never expires.
	ValidUntil time.Time
}

// Valid is the score's values while it has not expired by now, and nil
// (no score: nothing fits) once it has or where there is none, as
// ValidScoreValues.
func (s Score) Valid(now time.Time) map[string]int32 {
	if !s.Found || (!s.ValidUntil.IsZero() && !now.Before(s.ValidUntil)) {
		return nil
	}
	return s.Values
}

// Scores reads clusters' capacity scores and keeps each one's values,
// parsed once per version of the score. Ranking the candidates of one
// FleetVirtualMachine reads the score of every cluster (1,000 in a big
// fleet), and a hub reads them again on every reconcile of a
// FleetVirtualMachine waiting for room: with a deep copy and a new map
// each time, that was most of what a 10,000-FleetVM burst allocated. The
// hub's cache returns AddOnPlacementScores without a deep copy
// (hub.CacheOptions), so a read is one shallow copy and a lookup here.
//
// The object a read copies the cached score into is reused (scoreObjects),
// and a score already parsed is found under a read lock: the workers of a
// 16-core hub read the same clusters at once.
//
// The zero value is ready; a nil *Scores reads without keeping anything.
type Scores struct {
	mu     sync.RWMutex
	parsed map[string]parsedScore
}

// scoreObjects are the objects Read gets a score into: it keeps nothing of
// one once it has its resourceVersion and, when new, its parsed values.
var scoreObjects = sync.Pool{New: func() any { return &clusterv1alpha1.AddOnPlacementScore{} }}

type parsedScore struct {
	resourceVersion string
	score           Score
}

// Read reads cluster's score from c. A score c does not find is not
// Found; other errors are returned.
func (s *Scores) Read(ctx context.Context, c client.Reader, cluster string) (Score, error) {
	obj := scoreObjects.Get().(*clusterv1alpha1.AddOnPlacementScore)
	defer func() {
		// Zeroed, so a pooled object holds nothing of the cache's.
		*obj = clusterv1alpha1.AddOnPlacementScore{}
		scoreObjects.Put(obj)
	}()
	if err := c.Get(ctx, types.NamespacedName{Namespace: cluster, Name: fleetv1alpha1.CapacityScoreName}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			s.forget(cluster)
			return Score{}, nil
		}
		return Score{}, fmt.Errorf("get AddOnPlacementScore %s/%s: %w", cluster, fleetv1alpha1.CapacityScoreName, err)
	}
	if s == nil {
		return scoreOf(obj), nil
	}
	s.mu.RLock()
	p, ok := s.parsed[cluster]
	s.mu.RUnlock()
	if ok && p.resourceVersion == obj.ResourceVersion && obj.ResourceVersion != "" {
		return p.score, nil
	}
	score := scoreOf(obj)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parsed == nil {
		s.parsed = map[string]parsedScore{}
	}
	s.parsed[cluster] = parsedScore{resourceVersion: obj.ResourceVersion, score: score}
	return score, nil
}

func (s *Scores) forget(cluster string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.parsed, cluster)
	s.mu.Unlock()
}

func scoreOf(obj *clusterv1alpha1.AddOnPlacementScore) Score {
	score := Score{Found: true, Values: ScoreValues(obj)}
	if obj.Status.ValidUntil != nil {
		score.ValidUntil = obj.Status.ValidUntil.Time
	}
	return score
}
