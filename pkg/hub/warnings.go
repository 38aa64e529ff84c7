package hub

import (
	"context"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// WarningHandler logs the API server's warnings as controller-runtime
// does (with the logger of the reconcile that got them), except the one
// about Argo CD's own finalizer name: the API server warns that
// resources-finalizer.argocd.argoproj.io is not domain-qualified every time
// FleetVM adds it to an Application, which is every Application it deletes
// with its VM. The name is Argo CD's, nothing an operator can change, and
// the line would be logged once per cluster of every FleetVM deleted.
func WarningHandler() rest.WarningHandlerWithContext {
	return argoFinalizerNameFilter{next: log.NewKubeAPIWarningLogger(log.KubeAPIWarningLoggerOptions{})}
}

type argoFinalizerNameFilter struct {
	next rest.WarningHandlerWithContext
}

func (f argoFinalizerNameFilter) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, message string) {
	if strings.Contains(message, `"`+argoapp.ResourcesFinalizerName+`"`) && strings.Contains(message, "domain-qualified finalizer name") {
		return
	}
	f.next.HandleWarningHeaderWithContext(ctx, code, agent, message)
}
