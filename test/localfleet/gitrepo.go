package localfleet

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// GitRepoName is the name of the git repository the local fleet serves.
const GitRepoName = "fleetvm-examples.git"

// gitRepo serves, on loopback, git repositories made from folders of the
// FleetVM repository (examples/git, and test data): one commit on branch
// main each, or a history of commits tagged by folder, served over git's smart HTTP protocol by `git http-backend`,
// the server side that ships with git. Argo CD's repo server clones them as
// it would any remote repository.
type gitRepo struct {
	// URLs are the repositories' clone URLs by name ("<name>.git").
	URLs   map[string]string
	server *http.Server
}

// serveGit commits the files of each folder of repos (repository name →
// folder) into a bare repository in dir, and those of each history
// (repository name → folders) one commit per folder in order, each tagged
// with its folder's name, and serves them on addr (127.0.0.1:0 picks a
// free port).
func serveGit(repos map[string]string, histories map[string][]string, dir, addr string) (*gitRepo, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("git sources need git on PATH (Argo CD's repo server runs it too): %w", err)
	}
	root := filepath.Join(dir, "served")
	all := map[string][]string{}
	for name, src := range repos {
		all[name] = []string{src}
	}
	for name, srcs := range histories {
		if _, ok := all[name]; ok || len(srcs) == 0 {
			return nil, fmt.Errorf("git repository %s: served twice, or a history of no commit", name)
		}
		all[name] = srcs
	}
	for name, srcs := range all {
		work := filepath.Join(dir, "work", name)
		if err := runGit(gitPath, "init", "--quiet", "--initial-branch=main", work); err != nil {
			return nil, err
		}
		for _, src := range srcs {
			// Each commit holds exactly its folder's files.
			if err := runGit(gitPath, "-C", work, "rm", "-r", "--quiet", "--ignore-unmatch", "."); err != nil {
				return nil, err
			}
			if err := copyTree(src, work); err != nil {
				return nil, err
			}
			steps := [][]string{
				{"-C", work, "add", "--all"},
				{"-C", work, "-c", "user.name=FleetVM local fleet", "-c", "user.email=localfleet@fleetvm.invalid",
					"commit", "--quiet", "--no-gpg-sign", "-m", "FleetVM " + name + " " + filepath.Base(src)},
			}
			if _, history := histories[name]; history {
				steps = append(steps, []string{"-C", work, "tag", filepath.Base(src)})
			}
			for _, args := range steps {
				if err := runGit(gitPath, args...); err != nil {
					return nil, err
				}
			}
		}
		if err := runGit(gitPath, "clone", "--quiet", "--bare", work, filepath.Join(root, name)); err != nil {
			return nil, err
		}
	}

	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("git server on %s: %w", addr, err)
	}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Root: "/git",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull},
	}
	mux := http.NewServeMux()
	mux.Handle("/git/", backend)
	g := &gitRepo{URLs: map[string]string{}, server: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	for name := range all {
		g.URLs[name] = fmt.Sprintf("http://%s/git/%s", l.Addr(), name)
	}
	go func() { _ = g.server.Serve(l) }()
	return g, nil
}

func (g *gitRepo) close() {
	if g != nil && g.server != nil {
		_ = g.server.Close()
	}
}

// runGit runs git with no user or system configuration, so a developer's
// settings (signing, hooks, default branch) cannot change what is served.
func runGit(gitPath string, args ...string) error {
	cmd := exec.Command(gitPath, args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %v: %w: %s", args, err, out.String())
	}
	return nil
}

// copyTree copies the regular files under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
