// Package argoapptest turns Argo CD's own objects into the hub's view of
// them (package argoapp), for tests that build Argo CD's objects as Argo
// CD does. fleetvm-hub does not link Argo CD's module; tests may.
package argoapptest

import (
	"encoding/json"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// FromArgo is app as the hub's cache holds it: Argo CD's Application
// encoded as the API server sends it and decoded as argoapp's type, then
// trimmed (argoapp.Trim).
func FromArgo(app *argov1alpha1.Application) (*argoapp.Application, error) {
	raw, err := json.Marshal(app)
	if err != nil {
		return nil, err
	}
	out := &argoapp.Application{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	if _, err := argoapp.Trim(out); err != nil {
		return nil, err
	}
	return out, nil
}
