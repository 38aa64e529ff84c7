// Command argocd is the part of Argo CD the FleetVM local fleet runs, built
// from the argo-cd v3 module: the application controller, the ApplicationSet
// controller and the repo server, in one binary that picks the component by
// the name it is called by (links named argocd-application-controller,
// argocd-applicationset-controller and argocd-repo-server), or by
// ARGOCD_BINARY_NAME, as Argo CD's own image does. argocd-git-ask-pass is
// there too: the repo server runs it as git's credential helper.
//
// Argo CD's API server, UI, CLI, Dex and notifications are left out: the
// local fleet does not need them, and they would only make the build longer.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	appsetcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-applicationset-controller/commands"
	gitaskpass "github.com/argoproj/argo-cd/v3/cmd/argocd-git-ask-pass/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/util/log"
)

// components maps the names this binary answers to onto Argo CD commands.
var components = map[string]func() *cobra.Command{
	"argocd-application-controller":    appcontroller.NewCommand,
	"argocd-applicationset-controller": appsetcontroller.NewCommand,
	"argocd-repo-server":               reposerver.NewCommand,
	"argocd-git-ask-pass":              gitaskpass.NewCommand,
}

func main() {
	// klog (client-go) logs through Argo CD's logrus setup.
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))

	name := filepath.Base(os.Args[0])
	if v := os.Getenv("ARGOCD_BINARY_NAME"); v != "" {
		name = v
	}
	newCommand, ok := components[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "argocd: called as %q; link or name this binary as one of: "+
			"argocd-application-controller, argocd-applicationset-controller, argocd-repo-server, argocd-git-ask-pass\n", name)
		os.Exit(2)
	}
	if err := newCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
