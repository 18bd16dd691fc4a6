package unixmode

import (
	"io/fs"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, bits := range []uint32{0, 0o644, 0o755, 0o4755, 0o2775, 0o1777, 0o7777, 0o600} {
		m := Perm(bits)
		if got := Bits(m); got != bits {
			t.Errorf("Bits(Perm(%#o)) = %#o", bits, got)
		}
	}
	if m := Perm(0o4755); m&fs.ModeSetuid == 0 || m.Perm() != 0o755 {
		t.Errorf("Perm(04755) = %v", m)
	}
	if Perm(0o100644) != 0o644 {
		t.Errorf("Perm keeps file-type bits: %v", Perm(0o100644))
	}
}
