package status

import (
	"errors"
	"fmt"
)

// forbiddenError is a spec the FleetVirtualMachine's namespace may not
// use; it is shown with reason Forbidden and nothing is delivered.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }

func Forbidden(format string, args ...any) error {
	return &forbiddenError{msg: fmt.Sprintf(format, args...)}
}

func IsForbidden(err error) bool {
	var f *forbiddenError
	return errors.As(err, &f)
}
