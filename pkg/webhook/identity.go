package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=selfsubjectreviews,verbs=create

// WhoAmI asks the API server which user c acts as (a SelfSubjectReview,
// which every authenticated user may create): the user the webhooks
// recognise as fleetvm-hub, whatever identity it runs as (its
// ServiceAccount in the chart, a kubeconfig's user elsewhere), with
// nothing to configure.
func WhoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("create SelfSubjectReview: %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("the SelfSubjectReview names no user")
	}
	return review.Status.UserInfo.Username, nil
}

// hubUser remembers fleetvm-hub's user once the API server told it.
type hubUser struct {
	c    client.Client
	mu   sync.Mutex
	user string
}

// get returns fleetvm-hub's user, asking the API server until it answers.
func (h *hubUser) get(ctx context.Context) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.user != "" {
		return h.user, nil
	}
	if h.c == nil {
		return "", errors.New("no client to ask the API server with")
	}
	user, err := WhoAmI(ctx, h.c)
	if err != nil {
		return "", err
	}
	h.user = user
	return user, nil
}
