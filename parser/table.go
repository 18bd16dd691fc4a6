package parser

import "maps"

// table is a copy-on-write map from names to values. The walker copies its
// state at every subshell, branch and loop; with a table that copy costs
// what the source changed since the last merge, not everything it ever
// defined. A table's base is shared with its clones and never written; its
// writes go to an overlay of its own, which a clone copies. An overlay that
// grows past maxOverlay is merged into a new base at the next clone.
type table[V comparable] struct {
	base *frozen[V]
	top  map[string]slot[V]
}

// frozen is a base that no table writes; tables that share one can be
// compared by the pointer.
type frozen[V comparable] struct{ m map[string]V }

// slot is one overlay entry: a value, or the removal of the base's.
type slot[V comparable] struct {
	v    V
	gone bool
}

// maxOverlay bounds the overlay a clone copies.
const maxOverlay = 16

func (t *table[V]) get(name string) (V, bool) {
	if s, ok := t.top[name]; ok {
		var zero V
		if s.gone {
			return zero, false
		}
		return s.v, true
	}
	if t.base == nil {
		var zero V
		return zero, false
	}
	v, ok := t.base.m[name]
	return v, ok
}

func (t *table[V]) set(name string, v V) {
	if t.top == nil {
		t.top = map[string]slot[V]{}
	}
	t.top[name] = slot[V]{v: v}
}

func (t *table[V]) del(name string) {
	if t.base != nil {
		if _, ok := t.base.m[name]; ok {
			if t.top == nil {
				t.top = map[string]slot[V]{}
			}
			t.top[name] = slot[V]{gone: true}
			return
		}
	}
	delete(t.top, name)
}

// clone returns a table with the same entries that t's later writes do not
// change, nor its own t's.
func (t *table[V]) clone() table[V] {
	if len(t.top) > maxOverlay {
		t.merge()
	}
	return table[V]{base: t.base, top: maps.Clone(t.top)}
}

// merge moves the overlay into a new base. The entries stay the same.
func (t *table[V]) merge() {
	n := 0
	if t.base != nil {
		n = len(t.base.m)
	}
	m := make(map[string]V, n+len(t.top))
	if t.base != nil {
		maps.Copy(m, t.base.m)
	}
	for k, s := range t.top {
		if s.gone {
			delete(m, k)
		} else {
			m[k] = s.v
		}
	}
	t.base, t.top = &frozen[V]{m}, nil
}

// each calls fn with every entry, in no particular order, until fn
// returns false.
func (t *table[V]) each(fn func(string, V) bool) {
	for k, s := range t.top {
		if !s.gone && !fn(k, s.v) {
			return
		}
	}
	if t.base == nil {
		return
	}
	for k, v := range t.base.m {
		if _, over := t.top[k]; !over && !fn(k, v) {
			return
		}
	}
}

// differing calls fn with every name whose entry may differ between a and
// b (and with others): only the overlays when the two share their base.
func differing[V comparable](a, b *table[V], fn func(string)) {
	if a.base == b.base {
		for k := range a.top {
			fn(k)
		}
		for k := range b.top {
			if _, ok := a.top[k]; !ok {
				fn(k)
			}
		}
		return
	}
	seen := map[string]bool{}
	for _, t := range []*table[V]{a, b} {
		t.each(func(k string, _ V) bool {
			if !seen[k] {
				seen[k] = true
				fn(k)
			}
			return true
		})
	}
}
