package hub

import (
	"k8s.io/client-go/tools/record"
)

// EventCacheSize is how many objects' recent Events the hub's event
// correlator remembers, in each of its three caches: the spam filter's
// rate per object, the aggregation of similar Events and the count of
// repeated ones. client-go's default is 4,096, which holds about 5.8 MiB
// once that many objects have had an Event: a hub of 10,000
// FleetVirtualMachines fills it with the one Event each rolls out with
// (Ready) and keeps it for the hub's life, though no FleetVM of those
// repeats one. The hub emits Events on transitions, not on every
// reconcile, so what the caches are for (an object repeating an Event
// within minutes) concerns the few objects changing at a time; 512 keep
// 0.7 MiB (TestEventCorrelatorIsBounded).
const EventCacheSize = 512

// EventCorrelation are the hub's event correlator settings.
var EventCorrelation = record.CorrelatorOptions{LRUCacheSize: EventCacheSize}

// EventBroadcaster is the hub's event broadcaster, with EventCorrelation.
// The manager does not stop a broadcaster it is given: its owner shuts it
// down once the manager stopped, as the manager shuts down one it made.
func EventBroadcaster() record.EventBroadcaster {
	return record.NewBroadcaster(record.WithCorrelatorOptions(EventCorrelation))
}
