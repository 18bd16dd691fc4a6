package watch

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// eventHeader is the size of struct inotify_event without its name.
const eventHeader = 16

// errShortEvent reports an event buffer that ends inside an event. The
// kernel never returns one; a decoder that meets one has lost track of
// the stream, so the caller must treat it as lost events.
var errShortEvent = errors.New("inotify event buffer ends inside an event")

// event is one decoded struct inotify_event.
type event struct {
	wd     int32
	mask   uint32
	cookie uint32
	name   string // without the NUL padding; "" for the watched directory itself
}

// parseEvents appends the events in buf, as read from an inotify file
// descriptor, to out. It stops at the first malformed event and returns
// the events before it with an error.
func parseEvents(buf []byte, out []event) ([]event, error) {
	for len(buf) > 0 {
		if len(buf) < eventHeader {
			return out, fmt.Errorf("%w: %d bytes of header", errShortEvent, len(buf))
		}
		ev := event{
			wd:     int32(binary.NativeEndian.Uint32(buf[0:])),
			mask:   binary.NativeEndian.Uint32(buf[4:]),
			cookie: binary.NativeEndian.Uint32(buf[8:]),
		}
		n := binary.NativeEndian.Uint32(buf[12:])
		if uint64(n) > uint64(len(buf)-eventHeader) {
			return out, fmt.Errorf("%w: name of %d bytes, %d left", errShortEvent, n, len(buf)-eventHeader)
		}
		name := buf[eventHeader : eventHeader+int(n)]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		ev.name = string(name)
		out = append(out, ev)
		buf = buf[eventHeader+int(n):]
	}
	return out, nil
}
