// Command dockerfilecheck lints Dockerfiles with BuildKit's own Dockerfile
// linter: the rules of `docker build --check`, without a Docker engine and
// without a network.
//
// Base images are not fetched: they resolve to an empty linux image config,
// so rules that need a base image's configuration (for instance a variable
// defined only in the base image's ENV) see none. Everything else, the
// Dockerfile's own structure, instructions and arguments, is checked as
// `docker build --check` checks it.
//
// Usage: dockerfilecheck Dockerfile...
// It prints one line per finding and exits 1 when there is any.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

// offline resolves every base image to an empty image config.
type offline struct{}

func (offline) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	platform := ocispecs.Platform{OS: "linux", Architecture: runtime.GOARCH}
	if opt.ImageOpt != nil && opt.ImageOpt.Platform != nil {
		platform = *opt.ImageOpt.Platform
	}
	cfg, err := json.Marshal(ocispecs.Image{Platform: platform})
	if err != nil {
		return "", "", nil, err
	}
	return ref, digest.FromBytes(cfg), cfg, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dockerfilecheck Dockerfile...")
		os.Exit(2)
	}
	findings := 0
	for _, path := range os.Args[1:] {
		n, err := check(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		findings += n
	}
	if findings > 0 {
		os.Exit(1)
	}
}

func check(path string) (int, error) {
	dt, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sm := llb.NewSourceMap(nil, path, "Dockerfile", dt)
	sm.Definition = &llb.Definition{}
	res, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{
		SourceMap:    sm,
		MetaResolver: offline{},
	})
	if err != nil {
		return 0, err
	}
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		fmt.Printf("%s:%d: %s: %s (%s)\n", path, line, w.RuleName, w.Detail, w.URL)
	}
	n := len(res.Warnings)
	if res.Error != nil {
		fmt.Printf("%s: does not build: %s\n", path, res.Error.Message)
		n++
	}
	return n, nil
}
