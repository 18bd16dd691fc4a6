// Package stats holds what the side-by-side benchmarks share: the order
// of a round, quantiles, and the machine's load.
package stats

import (
	"os"
	"slices"
	"strings"
)

// Order is the order of round r: items rotated by r, and reversed every
// other cycle, so that each item runs in each position and after each
// other.
func Order[T any](items []T, r int) []T {
	k := len(items)
	out := make([]T, 0, k)
	for i := range k {
		out = append(out, items[(r+i)%k])
	}
	if (r/k)%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// Quantile returns the q-quantile of v, interpolating between ranks; 0
// for no values.
func Quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	x := q * float64(len(s)-1)
	i := int(x)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (x-float64(i))*(s[i+1]-s[i])
}

// Loadavg returns the 1, 5 and 15 minute load averages as
// /proc/loadavg gives them, or "?".
func Loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
