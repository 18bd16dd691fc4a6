package checkpoint

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress prints "hashed N of M files" to a terminal once work has taken
// over a second, at most four times a second. A nil progress does nothing.
type progress struct {
	w       io.Writer
	what    string
	start   time.Time
	mu      sync.Mutex
	n, of   int
	last    time.Time
	printed bool
}

func newProgress(w io.Writer, what string) *progress {
	if w == nil {
		return nil
	}
	return &progress{w: w, what: what, start: time.Now()}
}

func (p *progress) total(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.of = n
	p.mu.Unlock()
}

func (p *progress) add(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	t := time.Now()
	if t.Sub(p.start) < time.Second || t.Sub(p.last) < 250*time.Millisecond {
		return
	}
	p.last = t
	p.printed = true
	fmt.Fprintf(p.w, "\rundosh: %s: %d of %d files", p.what, p.n, p.of)
}

// done ends the progress line, if one was printed.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printed {
		fmt.Fprintf(p.w, "\rundosh: %s: %d of %d files, done\n", p.what, p.n, p.of)
	}
}
