package fleetenv

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every 100ms until it returns true, returns an
// error, or timeout passes. It is the one way tests wait: bounded, never a
// bare sleep. The last error from cond, if any, is part of the timeout error.
func Eventually(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := cond()
		if err != nil {
			last = err
			return false, nil //nolint:nilerr // an error is a "not yet": the timeout reports the last one
		}
		return ok, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last error: %v)", err, last)
	}
	return err
}
