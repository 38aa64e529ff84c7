package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func cgroup(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLimit(t *testing.T) {
	cases := map[string]struct {
		files   map[string]string
		want    int64
		wantOK  bool
		wantErr bool
	}{
		"v2, the chart's 512Mi": {files: map[string]string{"memory.max": "536870912\n"}, want: 512 << 20, wantOK: true},
		"v2, no limit":          {files: map[string]string{"memory.max": "max\n"}},
		"v1, 1Gi":               {files: map[string]string{"memory/memory.limit_in_bytes": "1073741824\n"}, want: 1 << 30, wantOK: true},
		"v1, no limit":          {files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}},
		"no cgroup":             {files: map[string]string{}},
		"garbage":               {files: map[string]string{"memory.max": "lots\n"}, wantErr: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok, err := Limit(cgroup(t, c.files))
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if got != c.want || ok != c.wantOK {
				t.Errorf("Limit = %d, %v; want %d, %v", got, ok, c.want, c.wantOK)
			}
		})
	}
}

// TestApply: the runtime's soft limit follows the container's limit, and
// an operator's GOMEMLIMIT is left alone.
func TestApply(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	root := cgroup(t, map[string]string{"memory.max": "536870912"})

	t.Setenv("GOMEMLIMIT", "")
	out, err := Apply(root)
	if err != nil {
		t.Fatal(err)
	}
	limit := int64(512 << 20)
	want := int64(float64(limit) * Share)
	if out.Source != "cgroup" || out.Container != 512<<20 || out.Soft != want {
		t.Errorf("Apply = %+v, want cgroup 512 MiB, soft %d", out, want)
	}
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Errorf("runtime soft limit = %d, want %d", got, want)
	}

	debug.SetMemoryLimit(300 << 20) // as GOMEMLIMIT=300MiB sets it at start
	t.Setenv("GOMEMLIMIT", "300MiB")
	if out, err = Apply(root); err != nil || out.Source != "GOMEMLIMIT" || out.Soft != 300<<20 {
		t.Errorf("Apply with GOMEMLIMIT = %+v, %v; want it left at 300 MiB", out, err)
	}
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("runtime soft limit = %d, want GOMEMLIMIT's %d", got, 300<<20)
	}

	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(math.MaxInt64)
	if out, err = Apply(cgroup(t, map[string]string{"memory.max": "max"})); err != nil || out.Source != "none" {
		t.Errorf("Apply without a limit = %+v, %v; want none", out, err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("runtime soft limit = %d, want none", got)
	}
}
