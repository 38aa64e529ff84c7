package kubectlfleetvm

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

const none = "-"

// newTable returns a tabwriter laid out like kubectl's tables.
func newTable(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
}

// row writes one table row; every cell is cleaned first.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = cell(c)
	}
	_, _ = fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// cell makes text from the API safe for a table and a terminal: no tabs,
// line breaks or control characters (a message could carry escape
// sequences), "-" when empty.
func cell(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if s == "" {
		return none
	}
	return s
}

// age is the time since t, as kubectl prints it; "-" when unset.
func age(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func join(items []string) string { return strings.Join(items, ",") }

func itoa[T ~int32 | ~int64 | ~int](n T) string { return fmt.Sprint(n) }

// counted is "1 copy", "2 copies".
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
