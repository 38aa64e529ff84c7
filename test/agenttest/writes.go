package agenttest

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Write is one write through a counting client: its verb ("create",
// "update", "patch", "delete", "status update", "status patch") and object.
type Write struct {
	Verb   string
	Object client.Object
}

// CountWrites wraps c so that every write, the status subresource's
// included, is first handed to count; reads pass straight through. The one
// counting client of the tests: zero-writes-at-rest checks and write
// budgets count through it.
func CountWrites(c client.Client, count func(Write)) client.Client {
	return &countingClient{Client: c, count: count}
}

type countingClient struct {
	client.Client
	count func(Write)
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.count(Write{"create", obj})
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.count(Write{"update", obj})
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.count(Write{"patch", obj})
	return c.Client.Patch(ctx, obj, p, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.count(Write{"delete", obj})
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: c.Client.Status(), count: c.count}
}

type countingStatus struct {
	client.SubResourceWriter
	count func(Write)
}

func (c *countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.count(Write{"status update", obj})
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}

func (c *countingStatus) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	c.count(Write{"status patch", obj})
	return c.SubResourceWriter.Patch(ctx, obj, p, opts...)
}
