package write

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestMemo: Ensure through a Memo writes what Ensure writes, and skips
// the comparison only for an object at the resourceVersion and ask it
// last saw.
func TestMemo(t *testing.T) {
	ctx := context.Background()
	want := func(v string) *corev1.ConfigMap {
		cm := configMap(map[string]string{"a": v}, map[string]string{"app": "fleetvm"})
		cm.UID = "uid-1" // the fake API server keeps it
		return cm
	}
	c, writes := counted()
	var m Memo
	if out, err := m.Ensure(ctx, c, want("1"), (*corev1.ConfigMap)(nil)); err != nil || out != Created {
		t.Fatalf("first Ensure = %v, %v; want Created", out, err)
	}
	for range 3 {
		if out, err := m.Ensure(ctx, c, want("1"), read(t, c)); err != nil || out != Unchanged {
			t.Fatalf("Ensure at rest = %v, %v; want Unchanged", out, err)
		}
	}
	if *writes != 1 {
		t.Fatalf("writes = %d, want 1 (the create)", *writes)
	}

	// The comparison is skipped at the same resourceVersion and ask: a
	// copy altered behind the API server's back (which a real object
	// never is) is not looked at.
	altered := read(t, c)
	altered.Data["a"] = "behind its back"
	if out, err := m.Ensure(ctx, c, want("1"), altered); err != nil || out != Unchanged {
		t.Fatalf("Ensure at the remembered version = %v, %v; want Unchanged without a comparison", out, err)
	}

	// Someone's edit makes a new resourceVersion: put back.
	edited := read(t, c)
	edited.Data["a"] = "edited"
	if err := c.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if out, err := m.Ensure(ctx, c, want("1"), read(t, c)); err != nil || out != Updated {
		t.Fatalf("Ensure after an edit = %v, %v; want Updated", out, err)
	}
	if got := read(t, c).Data["a"]; got != "1" {
		t.Errorf("after the edit, data a = %q, want it put back to 1", got)
	}

	// A new ask at the same resourceVersion: written.
	if out, err := m.Ensure(ctx, c, want("2"), read(t, c)); err != nil || out != Updated {
		t.Fatalf("Ensure of a new ask = %v, %v; want Updated", out, err)
	}
	if out, err := m.Ensure(ctx, c, want("2"), read(t, c)); err != nil || out != Unchanged {
		t.Fatalf("Ensure of the new ask again = %v, %v; want Unchanged", out, err)
	}
	if *writes != 4 {
		t.Errorf("writes = %d, want 4 (the create, the edit, the put back, the new ask)", *writes)
	}
}
