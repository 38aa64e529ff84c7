package hub

import (
	"os"
	"strconv"

	clientfeatures "k8s.io/client-go/features"
)

// WatchListEnv is client-go's own switch for streaming lists; the hub's
// --streaming-lists defaults to it.
const WatchListEnv = "KUBE_FEATURE_" + string(clientfeatures.WatchListClient)

// StreamingListsDefault is the default of --streaming-lists: what
// KUBE_FEATURE_WatchListClient in the hub's environment says, off when it
// says nothing.
func StreamingListsDefault() bool {
	on, err := strconv.ParseBool(os.Getenv(WatchListEnv))
	return err == nil && on
}

// StreamLists decides whether the hub's informers fill their caches with
// streaming lists (client-go's WatchListClient, KEP-3157): a watch that
// sends the objects there are one by one, then a bookmark, instead of one
// LIST response holding every object of a kind. Each object is decoded and
// passed through the cache's transform as it arrives, so a hub that starts
// with 30,000 Applications never holds the whole response and every
// object decoded whole at once. It costs time: the API server encodes each
// object as its own event and the hub decodes an envelope around each.
// On 2 cores at 10,000 FleetVMs a restart's peak RSS was 501 MiB instead
// of 587-594 MiB, but it took 185 s to be steady instead of 107-128 s, and
// the API server used twice the CPU (docs/developer-guide/benchmarks.md).
// Since the hub reads its own Lists item by item (itemwiseLists), they
// peak as low (500 MiB) at no such cost, so streaming lists gain nothing;
// the flag stays for hubs that set it.
// API servers that do not stream lists answer with an error and client-go
// lists as before.
//
// client-go reads KUBE_FEATURE_WatchListClient itself only while its own
// gates are in place; the Kubernetes packages the hub links replace them
// with gates that read no environment, so the hub sets the feature here.
// Call it before any client is made.
func StreamLists(on bool) {
	clientfeatures.ReplaceFeatureGates(streamingGates{Gates: clientfeatures.FeatureGates(), on: on})
}

// streamingGates decides WatchListClient and leaves every other client-go
// feature as the gates it wraps have it.
type streamingGates struct {
	clientfeatures.Gates
	on bool
}

func (g streamingGates) Enabled(key clientfeatures.Feature) bool {
	if key == clientfeatures.WatchListClient {
		return g.on
	}
	return g.Gates.Enabled(key)
}
