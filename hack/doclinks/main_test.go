package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheck(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# FleetVM\n\n"+
		"[book](docs/README.md), [install](docs/guide/install.md#install-on-a-hub), [code](pkg/), [site](https://example.com/x.md)\n"+
		"[gone](docs/missing.md) and [bad anchor](docs/guide/install.md#uninstall)\n"+
		"`[in a code span](nowhere.md)`\n"+
		"```\n[in a code block](nowhere.md)\n```\n"+
		"[here](#fleetvm) [not here](#nothing)\n")
	write("docs/README.md", "# The book\n\n[back](../README.md#fleetvm), [twice](guide/install.md#check-it-works-1)\n")
	write("docs/guide/install.md", "# Install on a hub\n\n## Check it works\n\n## Check it works\n\n## The webhook's certificate: `certManager`\n\n"+
		"[self](#the-webhooks-certificate-certmanager)\n")
	write("pkg/x.go", "package pkg\n")
	write("bin/tool/README.md", "[ignored](nowhere.md)\n")

	got, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:4: docs/guide/install.md#uninstall: no heading #uninstall",
		"README.md:4: docs/missing.md: no such file",
		"README.md:9: #nothing: no heading #nothing",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("broken links (-want,+got):\n%s", diff)
	}
}

func TestSlugify(t *testing.T) {
	cases := map[string]struct {
		title, want string
	}{
		"code span":   {title: "The local fleet: `make run`", want: "the-local-fleet-make-run"},
		"apostrophe":  {title: "fleetvm-hub's own rights", want: "fleetvm-hubs-own-rights"},
		"parentheses": {title: "Confinement on the clusters (Argo CD sync impersonation)", want: "confinement-on-the-clusters-argo-cd-sync-impersonation"},
		"unicode":     {title: "Shapes ≤ 100 — bounds", want: "shapes--100--bounds"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := slugify(tc.title); got != tc.want {
				t.Errorf("slugify(%q) = %q, want %q", tc.title, got, tc.want)
			}
		})
	}
}
