package exit

import (
	"errors"
	"fmt"
	"testing"

	"github.com/undosh/undosh/policy"
)

func TestCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, OK},
		{"usage", &UsageError{Msg: "x"}, Usage},
		{"wrapped usage", fmt.Errorf("run: %w", &UsageError{Msg: "x"}), Usage},
		{"broken policy", &policy.LoadError{File: "p.yaml", Line: 1, Col: 1, Msg: "x"}, Usage},
		{"other", errors.New("disk full"), Failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Code(tt.err); got != tt.want {
				t.Errorf("Code(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
