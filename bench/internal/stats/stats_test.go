package stats

import (
	"slices"
	"testing"
)

func TestQuantile(t *testing.T) {
	v := []float64{4, 1, 3, 2}
	for _, tt := range []struct{ q, want float64 }{{0, 1}, {0.5, 2.5}, {0.25, 1.75}, {1, 4}} {
		if got := Quantile(v, tt.q); got != tt.want {
			t.Errorf("Quantile(%v, %v) = %v, want %v", v, tt.q, got, tt.want)
		}
	}
	if !slices.Equal(v, []float64{4, 1, 3, 2}) {
		t.Errorf("Quantile sorted its argument: %v", v)
	}
	if Quantile(nil, 0.5) != 0 {
		t.Errorf("Quantile of nothing is not 0")
	}
}

func TestOrder(t *testing.T) {
	items := []string{"a", "b", "c"}
	want := [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"c", "b", "a"}, {"a", "c", "b"}, {"b", "a", "c"}}
	for r, w := range want {
		if got := Order(items, r); !slices.Equal(got, w) {
			t.Errorf("Order(%v, %d) = %v, want %v", items, r, got, w)
		}
	}
}
