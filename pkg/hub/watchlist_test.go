package hub

import (
	"testing"

	clientfeatures "k8s.io/client-go/features"
)

// TestStreamLists: --streaming-lists decides client-go's WatchListClient,
// whatever gates the linked Kubernetes packages installed, and leaves every
// other client-go feature as it was; its default follows client-go's own
// environment variable.
func TestStreamLists(t *testing.T) {
	before := clientfeatures.FeatureGates()
	t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(before) })
	other := clientfeatures.InformerResourceVersion
	otherWas := before.Enabled(other)
	for _, on := range []bool{true, false} {
		clientfeatures.ReplaceFeatureGates(before)
		StreamLists(on)
		if got := clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient); got != on {
			t.Errorf("StreamLists(%v): WatchListClient %v", on, got)
		}
		if clientfeatures.FeatureGates().Enabled(other) != otherWas {
			t.Errorf("StreamLists(%v): %s changed", on, other)
		}
	}
	for env, want := range map[string]bool{"": false, "true": true, "false": false, "not-a-bool": false} {
		t.Setenv(WatchListEnv, env)
		if got := StreamingListsDefault(); got != want {
			t.Errorf("%s=%q: default %v, want %v", WatchListEnv, env, got, want)
		}
	}
}
