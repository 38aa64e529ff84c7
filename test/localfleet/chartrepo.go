package localfleet

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// chartMeta is the part of Chart.yaml the repository index needs.
type chartMeta struct {
	APIVersion  string `json:"apiVersion"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	AppVersion  string `json:"appVersion,omitempty"`
	Description string `json:"description,omitempty"`
	Type        string `json:"type,omitempty"`
}

// chartRepo is a Helm chart repository on loopback serving one chart
// packaged from a folder of the repository: index.yaml and
// <name>-<version>.tgz, as `helm package` and `helm repo index` would
// write them. Argo CD's repo server fetches the chart from it as from any
// Helm repository.
type chartRepo struct {
	URL     string
	Chart   chartMeta
	server  *http.Server
	archive []byte
}

// serveChart packages the chart in dir and serves it on 127.0.0.1.
func serveChart(dir string) (*chartRepo, error) {
	b, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read chart: %w", err)
	}
	var meta chartMeta
	if err := yaml.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, "Chart.yaml"), err)
	}
	if meta.Name == "" || meta.Version == "" {
		return nil, fmt.Errorf("%s: name and version are required", filepath.Join(dir, "Chart.yaml"))
	}
	archive, err := packageChart(dir, meta.Name)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chart repository: %w", err)
	}
	r := &chartRepo{URL: "http://" + l.Addr().String() + "/charts", Chart: meta, archive: archive}
	index, err := r.index()
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /charts/index.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-yaml")
		_, _ = w.Write(index)
	})
	mux.HandleFunc("GET /charts/"+r.archiveName(), func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(archive)
	})
	r.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.server.Serve(l) }()
	return r, nil
}

func (r *chartRepo) archiveName() string {
	return fmt.Sprintf("%s-%s.tgz", r.Chart.Name, r.Chart.Version)
}

// index renders index.yaml: one entry, its digest and a URL relative to
// the repository.
func (r *chartRepo) index() ([]byte, error) {
	sum := sha256.Sum256(r.archive)
	entry := map[string]any{
		"apiVersion":  r.Chart.APIVersion,
		"name":        r.Chart.Name,
		"version":     r.Chart.Version,
		"appVersion":  r.Chart.AppVersion,
		"description": r.Chart.Description,
		"type":        r.Chart.Type,
		"digest":      hex.EncodeToString(sum[:]),
		"created":     time.Now().UTC().Format(time.RFC3339),
		"urls":        []string{r.archiveName()},
	}
	return yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"generated":  time.Now().UTC().Format(time.RFC3339),
		"entries":    map[string]any{r.Chart.Name: []any{entry}},
	})
}

func (r *chartRepo) close() {
	if r != nil && r.server != nil {
		_ = r.server.Close()
	}
}

// packageChart writes the chart folder as a gzipped tar with every file
// under "<name>/", the layout of `helm package`.
func packageChart(dir, name string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{
			Name:    path.Join(name, filepath.ToSlash(rel)),
			Mode:    0o644,
			Size:    int64(len(b)),
			ModTime: time.Unix(0, 0),
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("package chart %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
