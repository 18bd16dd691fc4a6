package parser

import (
	"container/list"
	"crypto/sha256"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Cache keeps parsed sources by their content, for a caller that decides
// many steps: the front end's server, where a harness's shell snapshot,
// sourced by every command, is then parsed once per content rather than
// once per command. The parse is never changed by a walk, so one entry
// serves concurrent [Parse] calls. A nil *Cache parses every time. Only
// sources of at least [MinCached] bytes are kept.
type Cache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cached, most recent first
	byKey map[cacheKey]*list.Element
	hits  int
}

// MinCached is the size below which a source is parsed again each time:
// a command line costs less to parse than to hash.
const MinCached = 1024

type cacheKey struct {
	sum     [sha256.Size]byte
	variant syntax.LangVariant
}

type cached struct {
	key   cacheKey
	stmts []*syntax.Stmt
	err   error
}

// NewCache returns a cache of at most n parsed sources.
func NewCache(n int) *Cache {
	return &Cache{max: max(n, 1), order: list.New(), byKey: map[cacheKey]*list.Element{}}
}

// Hits is how many parses the cache saved.
func (c *Cache) Hits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

// parse returns src's statements, up to its first syntax error, and that
// error.
func (c *Cache) parse(src string, variant syntax.LangVariant) ([]*syntax.Stmt, error) {
	if c == nil || len(src) < MinCached {
		return parseStmts(src, variant)
	}
	key := cacheKey{sha256.Sum256([]byte(src)), variant}
	c.mu.Lock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		c.hits++
		p := e.Value.(*cached)
		c.mu.Unlock()
		return p.stmts, p.err
	}
	c.mu.Unlock()
	stmts, err := parseStmts(src, variant)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; !ok {
		c.byKey[key] = c.order.PushFront(&cached{key: key, stmts: stmts, err: err})
		for c.order.Len() > c.max {
			old := c.order.Remove(c.order.Back()).(*cached)
			delete(c.byKey, old.key)
		}
	}
	return stmts, err
}

// parseStmts parses src whole: its statements up to the first syntax
// error, and the error. (Parsing before walking also means a statement is
// walked with every here-document of its line read: in `python3 <<'EOF';
// ls`, the code comes after the ls.)
func parseStmts(src string, variant syntax.LangVariant) ([]*syntax.Stmt, error) {
	p := syntax.NewParser(syntax.Variant(variant))
	var stmts []*syntax.Stmt
	var err error
	// mvdan.cc/sh v3.14.1's iterator may yield again after its consumer
	// stops (which panics), so the loop never breaks: it drains.
	for s, e := range p.StmtsSeq(strings.NewReader(src)) {
		switch {
		case err != nil:
		case e != nil:
			err = e
		default:
			stmts = append(stmts, s)
		}
	}
	return stmts, err
}
