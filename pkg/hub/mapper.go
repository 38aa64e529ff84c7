package hub

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// MapperProvider is controller-runtime's dynamic REST mapper that keeps
// each mapping it found. The hub's cache asks the mapper whether a kind is
// namespaced on every Get and List it serves, and the dynamic mapper
// answers through a priority mapper that builds its candidate lists anew
// each time: 3.7 % of the hub's CPU in the first minute of a restart at
// 10,000 FleetVMs (docs/developer-guide/benchmarks.md). A kind's mapping
// does not change while the hub runs (its CRDs are installed before it);
// what the mapper does not find is asked again, so a CRD installed later
// is found as before.
func MapperProvider(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &keptMappings{RESTMapper: m}, nil
}

// keptMappings answers RESTMapping from what it found before.
type keptMappings struct {
	meta.RESTMapper
	found sync.Map // mappingKey → meta.RESTMapping
}

type mappingKey struct {
	gk       schema.GroupKind
	versions string
}

func (m *keptMappings) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := mappingKey{gk: gk, versions: strings.Join(versions, ",")}
	if v, ok := m.found.Load(key); ok {
		mapping := v.(meta.RESTMapping)
		return &mapping, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.found.Store(key, *mapping)
	return mapping, nil
}
