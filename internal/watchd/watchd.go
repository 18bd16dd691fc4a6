// Package watchd serves the workspace watchers of a state directory from
// the front end's server (package front), and is their client in undosh
// and undoctl.
//
// A checkpoint asks the watcher of its workspace what changed since the
// last checkpoint it was told of ([checkpoint.Watcher]); the watcher, a
// [watch.Tree] kept in the server, answers from the events it read. One
// workspace is watched per root and checkpoint options (what they leave
// out decides what a base checkpoint holds). A workspace is watched from
// the first time a checkpoint asks, so the first checkpoint of a server's
// life walks everything; so does any checkpoint whose watcher may have
// missed an event, and any checkpoint that cannot reach the server.
//
// Wire format: on the server's socket, "UNDOSHW1", u32 (little
// endian) length, then a JSON [Request]; the answer is the same header
// and a JSON [Answer]. One request per connection.
package watchd

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/undosh/undosh/checkpoint"
	"github.com/undosh/undosh/watch"
)

// Magic opens every request and answer.
const Magic = "UNDOSHW1"

// maxMessage bounds a message; a watcher's answer is bounded by maxPaths.
const maxMessage = 64 << 20

// maxPaths bounds the changes one answer carries: past it, a walk costs
// about as much as reading the changes would.
const maxPaths = 200_000

// maxTrees bounds the workspaces watched at once (inotify watches are a
// per-user budget); the one asked for least lately goes first.
const maxTrees = 16

// Request is one question to the watchers.
type Request struct {
	// Op is "changes", "recorded", "status" or "ping".
	Op string `json:"op"`
	// Root, Exclude and MaxSize name the workspace and the checkpoint
	// options its watcher serves.
	Root    string   `json:"root,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	MaxSize int64    `json:"max_size,omitempty"`
	// Epoch and ID, for "recorded".
	Epoch uint64 `json:"epoch,omitempty"`
	ID    string `json:"id,omitempty"`
}

// Answer is what the watchers say.
type Answer struct {
	Changes *checkpoint.Changes `json:"changes,omitempty"`
	Status  []Status            `json:"status,omitempty"`
	Err     string              `json:"error,omitempty"`
}

// Status is one watched workspace, for undoctl status.
type Status struct {
	watch.Status
	Exclude []string `json:"exclude,omitempty"`
	MaxSize int64    `json:"max_size,omitempty"`
}

// Service keeps the watchers of one state directory.
type Service struct {
	// Retention drops a workspace not asked about for this long.
	Retention time.Duration
	Log       *slog.Logger
	// RetryBroken is how long a watcher that can never tell again (its
	// workspace gone, the watch limit reached) is kept before the next
	// checkpoint starts a new one, which walks the tree to set up; zero
	// means a minute.
	RetryBroken time.Duration
	// InView reports whether the process pid sees the files the
	// service does (nil, or pid 0: the service itself).
	InView func(pid int) bool

	mu    sync.Mutex
	trees map[string]*tree
}

type tree struct {
	t       *watch.Tree
	root    string
	exclude []string
	maxSize int64
	asked   time.Time
	opened  time.Time
}

// drop stops the watcher t of key k, unless another replaced it.
func (s *Service) drop(k string, t *tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trees[k] == t {
		t.t.Close()
		delete(s.trees, k)
	}
}

func key(r Request) string {
	return r.Root + "\x00" + strings.Join(r.Exclude, "\x00") + "\x00" + strconv.FormatInt(r.MaxSize, 10)
}

// Close stops every watcher.
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.trees {
		t.t.Close()
		delete(s.trees, k)
	}
}

// Do answers one request from process pid.
func (s *Service) Do(r Request, pid int) Answer {
	switch r.Op {
	case "ping":
		return Answer{}
	case "status":
		return Answer{Status: s.status()}
	case "changes", "recorded":
	default:
		return Answer{Err: fmt.Sprintf("unknown op %q", r.Op)}
	}
	if s.InView != nil && pid != 0 && !s.InView(pid) {
		return Answer{Changes: &checkpoint.Changes{Full: "the caller sees other files than the watcher (another mount namespace or root)"}}
	}
	if !strings.HasPrefix(r.Root, "/") {
		return Answer{Err: fmt.Sprintf("root %q is not absolute", r.Root)}
	}
	t, err := s.tree(r)
	if err != nil {
		return Answer{Changes: &checkpoint.Changes{Full: "cannot watch: " + err.Error()}}
	}
	if r.Op == "recorded" {
		t.t.Recorded(r.Epoch, r.ID)
		return Answer{}
	}
	snap := t.t.Snapshot()
	retry := s.RetryBroken
	if retry == 0 {
		retry = time.Minute
	}
	if why := t.t.Broken(); why != "" && time.Since(t.opened) >= retry {
		// The workspace may be back (cloned again where it was) or the
		// limit raised: the next checkpoint watches it afresh.
		s.log().Info("watch: starting again", "root", t.root, "was", why)
		s.drop(key(r), t)
	}
	ch := &checkpoint.Changes{Epoch: snap.Epoch, Base: snap.Base, Full: snap.Full}
	if ch.Full == "" && len(snap.Paths) > maxPaths {
		ch.Full = fmt.Sprintf("too many changes (%d paths)", len(snap.Paths))
	}
	if ch.Full == "" {
		ch.Paths = make([]checkpoint.Changed, len(snap.Paths))
		for i, p := range snap.Paths {
			ch.Paths[i] = checkpoint.Changed{Rel: p.Rel, Tree: p.Tree}
		}
	}
	return Answer{Changes: ch}
}

// tree finds or starts the watcher of r's workspace, and drops those
// idle past the retention.
func (s *Service) tree(r Request) (*tree, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.trees == nil {
		s.trees = map[string]*tree{}
	}
	for k, t := range s.trees {
		if s.Retention > 0 && now.Sub(t.asked) > s.Retention {
			s.log().Info("watch: dropping idle workspace", "root", t.root)
			t.t.Close()
			delete(s.trees, k)
		}
	}
	k := key(r)
	if t, ok := s.trees[k]; ok {
		t.asked = now
		return t, nil
	}
	if len(s.trees) >= maxTrees {
		var oldest string
		for k, t := range s.trees {
			if oldest == "" || t.asked.Before(s.trees[oldest].asked) {
				oldest = k
			}
		}
		s.trees[oldest].t.Close()
		delete(s.trees, oldest)
	}
	wt, err := watch.Open(r.Root, watch.Options{Exclude: r.Exclude, MaxPaths: maxPaths + 1, Logger: s.Log})
	if err != nil {
		return nil, err
	}
	s.log().Info("watch: watching", "root", r.Root)
	t := &tree{t: wt, root: r.Root, exclude: r.Exclude, maxSize: r.MaxSize, asked: now, opened: now}
	s.trees[k] = t
	return t, nil
}

func (s *Service) status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Status{}
	for _, t := range s.trees {
		out = append(out, Status{Status: t.t.Status(), Exclude: t.exclude, MaxSize: t.maxSize})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Root < out[j].Root })
	return out
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// Encode frames a message.
func Encode(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 12, 12+len(body))
	copy(out, Magic)
	binary.LittleEndian.PutUint32(out[8:], uint32(len(body)))
	return append(out, body...), nil
}

// ReadBody reads the body of a message whose 12-byte header is head.
func ReadBody(r io.Reader, head []byte) ([]byte, error) {
	if len(head) != 12 || string(head[:8]) != Magic {
		return nil, errors.New("not a watch message")
	}
	n := binary.LittleEndian.Uint32(head[8:])
	if n > maxMessage {
		return nil, fmt.Errorf("message of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// Watcher is the [checkpoint.Watcher] of the stores with one set of
// options: it asks the server on a socket ([Client]) or, in the server
// itself, its service ([Service.Watcher]). When no watcher
// answers, every checkpoint walks.
type Watcher struct {
	exclude []string
	maxSize int64
	ask     func(Request) (Answer, error)
}

// Client asks the server listening on socket. A first snapshot of a
// large workspace waits for nothing (set-up runs on its own), so an
// exchange is bounded by Ask's default.
func Client(socket string, exclude []string, maxSize int64) *Watcher {
	return &Watcher{exclude: exclude, maxSize: maxSize, ask: func(r Request) (Answer, error) { return Ask(socket, r, 0) }}
}

// Watcher asks s, in the server itself.
func (s *Service) Watcher(exclude []string, maxSize int64) *Watcher {
	return &Watcher{exclude: exclude, maxSize: maxSize, ask: func(r Request) (Answer, error) { return s.Do(r, 0), nil }}
}

// Changes implements [checkpoint.Watcher].
func (w *Watcher) Changes(root string) checkpoint.Changes {
	a, err := w.ask(Request{Op: "changes", Root: root, Exclude: w.exclude, MaxSize: w.maxSize})
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED):
		return checkpoint.Changes{Full: "no server runs to watch it", Absent: true}
	case err != nil:
		return checkpoint.Changes{Full: "no watcher: " + err.Error(), Absent: true}
	case a.Err != "":
		return checkpoint.Changes{Full: "watcher: " + a.Err}
	case a.Changes == nil:
		return checkpoint.Changes{Full: "watcher: no answer"}
	}
	return *a.Changes
}

// Recorded implements [checkpoint.Watcher]. A lost message only makes
// the next checkpoint read more.
func (w *Watcher) Recorded(root string, epoch uint64, id string) {
	w.ask(Request{Op: "recorded", Root: root, Exclude: w.exclude, MaxSize: w.maxSize, Epoch: epoch, ID: id})
}

// Answers reports whether something listens on socket, quickly: a step
// that has no watcher to ask walks, or goes without a checkpoint.
func Answers(socket string) bool {
	a, err := Ask(socket, Request{Op: "ping"}, time.Second)
	return err == nil && a.Err == ""
}

// Ask sends one request to the server listening on socket.
func Ask(socket string, r Request, timeout time.Duration) (Answer, error) {
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return Answer{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	msg, err := Encode(r)
	if err != nil {
		return Answer{}, err
	}
	if _, err := conn.Write(msg); err != nil {
		return Answer{}, err
	}
	head := make([]byte, 12)
	if _, err := io.ReadFull(conn, head); err != nil {
		return Answer{}, fmt.Errorf("read answer: %w", err)
	}
	body, err := ReadBody(conn, head)
	if err != nil {
		return Answer{}, err
	}
	var a Answer
	if err := json.Unmarshal(body, &a); err != nil {
		return Answer{}, fmt.Errorf("answer: %w", err)
	}
	return a, nil
}
