package fork

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// marshal encodes the record of the copy as encoding/json would (indented
// with tabs), without its reflection: its first use costs a quarter of a
// millisecond, a twentieth of a whole entry. [Open] reads it back with
// encoding/json; TestMarshalMatchesJSON keeps the two in step.
func (c *Copy) marshal() []byte {
	b := []byte("{\n")
	field := func(name string, last bool, value func()) {
		b = append(b, "\t"...)
		b = appendJSONString(b, name)
		b = append(b, ": "...)
		value()
		if !last {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	str := func(s string) func() { return func() { b = appendJSONString(b, s) } }
	tm := func(t time.Time) func() { return func() { b = appendJSONString(b, t.Format(time.RFC3339Nano)) } }
	boolean := func(v bool) func() { return func() { b = strconv.AppendBool(b, v) } }
	num := func(n int64) func() { return func() { b = strconv.AppendInt(b, n, 10) } }
	// list writes a list of n elements, or null when isNil.
	list := func(isNil bool, n int, elem func(i int)) func() {
		return func() {
			if isNil {
				b = append(b, "null"...)
				return
			}
			if n == 0 {
				b = append(b, "[]"...)
				return
			}
			b = append(b, "[\n"...)
			for i := range n {
				b = append(b, "\t\t"...)
				elem(i)
				if i < n-1 {
					b = append(b, ',')
				}
				b = append(b, '\n')
			}
			b = append(b, "\t]"...)
		}
	}
	// object writes a nested object at depth 2, its fields at depth 3.
	object := func(fields []struct {
		name  string
		value func()
	}) {
		b = append(b, "{\n"...)
		for i, f := range fields {
			b = append(b, "\t\t\t"...)
			b = appendJSONString(b, f.name)
			b = append(b, ": "...)
			f.value()
			if i < len(fields)-1 {
				b = append(b, ',')
			}
			b = append(b, '\n')
		}
		b = append(b, "\t\t}"...)
	}
	type kv = struct {
		name  string
		value func()
	}
	field("id", false, str(c.ID))
	field("dir", false, str(c.Dir))
	field("t0", false, tm(c.T0))
	field("on_disk", false, boolean(c.OnDisk))
	field("hostname", false, str(c.Hostname))
	field("overlays", false, list(c.Overlays == nil, len(c.Overlays), func(i int) {
		l := c.Overlays[i]
		object([]kv{
			{"mount", str(l.Mount)},
			{"upper", str(l.Upper)},
			{"work", str(l.Work)},
			{"dev", func() { b = strconv.AppendUint(b, l.Dev, 10) }},
			{"mount_dev", str(l.MountDev)},
			{"fstype", str(l.FSType)},
			{"source", str(l.Source)},
			{"mount_id", num(int64(l.MountID))},
			{"read_only", boolean(l.ReadOnly)},
			{"same_fs", boolean(l.SameFS)},
		})
	}))
	field("skipped", false, list(c.Skipped == nil, len(c.Skipped), func(i int) { b = appendJSONString(b, c.Skipped[i]) }))
	field("seeded", false, list(c.Seeded == nil, len(c.Seeded), func(i int) { b = appendJSONString(b, c.Seeded[i]) }))
	field("mirrored", true, list(c.Mirrored == nil, len(c.Mirrored), func(i int) {
		m := c.Mirrored[i]
		object([]kv{
			{"path", str(m.Path)},
			{"mode", num(int64(m.Mode))},
			{"uid", num(int64(m.UID))},
			{"gid", num(int64(m.GID))},
			{"mtime", tm(m.Mtime)},
		})
	}))
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string, as encoding/json writes it
// (HTML characters escaped, invalid UTF-8 replaced).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
