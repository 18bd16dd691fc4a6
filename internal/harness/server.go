package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Server is the scripted model: an http.Handler that speaks enough of the
// Anthropic Messages, OpenAI Responses and Chat Completions and Gemini
// APIs to call the harness's shell tool once per turn with the next
// command of its script, and to end with a text message when the script is
// done.
//
// It is stateless in what it answers: the step a request is at is the
// number of tool results in it, so a harness that retries a request gets
// the same answer. It only records: every request, and for every step the
// result the harness sent back and how long that took.
// A request that offers no shell tool (a title, a summary, a quota check)
// gets a short text.
type Server struct {
	// Script is the commands to run, one a turn.
	Script []string
	// Log, when set, gets every request as one JSON line.
	Log io.Writer
	// OnDone, when set, is called once, before the final message goes
	// out: the harness is still running then.
	OnDone func()

	done    sync.Once
	mu      sync.Mutex
	sent    map[int]time.Time
	results map[int]Result
	errs    []string
	n       int
}

// Result is what the harness sent back for one step.
type Result struct {
	Step    int    `json:"step"` // from 0
	Command string `json:"command"`
	Tool    string `json:"tool"` // the tool the server called
	Text    string `json:"text"` // the tool result, as the model sees it
	// Latency is the time from the end of the response that called the
	// tool to the start of the request that carried the result.
	Latency time.Duration `json:"latency_ns"`
	Sent    time.Time     `json:"sent"`
	Got     time.Time     `json:"got"`
}

// logLine is one request in [Server.Log].
type logLine struct {
	N        int             `json:"n"`
	Time     time.Time       `json:"time"`
	Method   string          `json:"method"`
	Path     string          `json:"path"`
	Protocol Protocol        `json:"protocol,omitempty"`
	Step     int             `json:"step"`
	Reply    string          `json:"reply,omitempty"`
	Body     json.RawMessage `json:"body,omitempty"`
	Raw      string          `json:"raw,omitempty"`
}

// Results returns the results recorded so far, by step.
func (s *Server) Results() []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Result
	for i := range s.Script {
		if r, ok := s.results[i]; ok {
			out = append(out, r)
		}
	}
	return out
}

// Requests returns how many requests the server has had.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Errors returns what went wrong in serving: requests the server could
// not read or answer.
func (s *Server) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}

// route tells the protocol and the model from a request's path. Gemini
// names the model in the path (/v1beta/models/M:streamGenerateContent);
// the others in the body.
func route(path string) (p Protocol, model string, stream, ok bool) {
	switch {
	case strings.HasSuffix(path, "/messages"):
		return Anthropic, "", false, true
	case strings.HasSuffix(path, "/responses"):
		return Responses, "", false, true
	case strings.HasSuffix(path, "/chat/completions"):
		return Chat, "", false, true
	case strings.Contains(path, ":streamGenerateContent"), strings.Contains(path, ":generateContent"):
		m := path[strings.LastIndex(path, "/")+1:]
		m = m[:strings.Index(m, ":")]
		return Gemini, m, strings.Contains(path, ":streamGenerateContent"), true
	}
	return "", "", false, false
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	got := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, fmt.Errorf("read %s: %w", r.URL.Path, err))
		return
	}
	line := logLine{Time: got, Method: r.Method, Path: r.URL.String(), Step: -1}
	if json.Valid(body) {
		line.Body = body
	} else if len(body) > 0 {
		line.Raw = string(body)
	}
	defer s.log(&line)

	path := r.URL.Path
	switch {
	case strings.HasSuffix(path, "/count_tokens"):
		writeJSON(w, map[string]any{"input_tokens": 10})
		return
	case strings.Contains(path, ":countTokens"):
		writeJSON(w, map[string]any{"totalTokens": 10})
		return
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": "fake", "object": "model"}}, "models": []any{}})
		return
	}
	proto, model, stream, ok := route(path)
	if !ok || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"message":"not served here"}}`, http.StatusNotFound)
		return
	}
	line.Protocol = proto
	var turn Turn
	switch proto {
	case Anthropic:
		turn, err = DecodeAnthropic(body)
	case Responses:
		turn, err = DecodeResponses(body)
	case Chat:
		turn, err = DecodeChat(body)
	case Gemini:
		turn, err = DecodeGemini(body)
		turn.Model, turn.Stream = model, stream
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	rep := s.answer(turn, got)
	line.Step, line.Reply = len(turn.Results), rep.Tool+rep.Text
	if rep.Tool != "" {
		line.Reply = rep.Tool + " " + string(rep.Args)
	}
	if turn.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	switch proto {
	case Anthropic:
		err = EncodeAnthropic(w, turn.Model, rep, turn.Stream)
	case Responses:
		err = EncodeResponses(w, turn.Model, rep, turn.Stream)
	case Chat:
		err = EncodeChat(w, turn.Model, rep, turn.Stream)
	case Gemini:
		err = EncodeGemini(w, turn.Model, rep, turn.Stream)
	}
	if err != nil {
		s.note(fmt.Errorf("answer %s: %w", path, err))
		return
	}
	if rep.Tool != "" {
		s.mu.Lock()
		if s.sent == nil {
			s.sent = map[int]time.Time{}
		}
		s.sent[len(turn.Results)] = time.Now()
		s.mu.Unlock()
	}
}

// answer decides the reply to turn, and records the result the turn
// brings back, the first time it comes.
func (s *Server) answer(turn Turn, got time.Time) Reply {
	step := len(turn.Results)
	_, name, _ := s.call(turn.Tools, 0)
	if name == "" {
		// Not the agent's loop: a side question.
		if turn.JSON {
			return Reply{Text: `{"reasoning":"scripted","next_speaker":"user","model_choice":"flash"}`}
		}
		return Reply{Text: "ok"}
	}
	s.mu.Lock()
	if step > 0 {
		if _, seen := s.results[step-1]; !seen && step-1 < len(s.Script) {
			if s.results == nil {
				s.results = map[int]Result{}
			}
			sent := s.sent[step-1]
			r := Result{Step: step - 1, Command: s.Script[step-1], Tool: name, Text: turn.Results[step-1], Sent: sent, Got: got}
			if !sent.IsZero() {
				r.Latency = got.Sub(sent)
			}
			s.results[step-1] = r
		}
	}
	s.mu.Unlock()
	if step >= len(s.Script) {
		if s.OnDone != nil {
			s.done.Do(s.OnDone)
		}
		return Reply{Text: "All steps are done."}
	}
	rep, _, err := s.call(turn.Tools, step)
	if err != nil {
		s.note(err)
		return Reply{Text: "The scripted model cannot call this tool: " + err.Error()}
	}
	return rep
}

// call builds the reply that runs step's command with the shell tool
// among tools; name is "" when there is none.
func (s *Server) call(tools []Tool, step int) (rep Reply, name string, err error) {
	cmd := ""
	if step < len(s.Script) {
		cmd = s.Script[step]
	}
	name, args, err := ShellCall(tools, cmd, fmt.Sprintf("Scripted step %d", step+1))
	if err != nil {
		return Reply{}, "", err
	}
	return Reply{CallID: fmt.Sprintf("call_step%02d", step+1), Tool: name, Args: args}, name, nil
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	s.note(err)
	http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
}

func (s *Server) note(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err.Error())
	s.mu.Unlock()
}

func (s *Server) log(l *logLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	l.N = s.n
	if s.Log == nil {
		return
	}
	b, err := json.Marshal(l)
	if err != nil {
		s.errs = append(s.errs, fmt.Sprintf("log request %d: %v", l.N, err))
		return
	}
	if _, err := s.Log.Write(append(b, '\n')); err != nil {
		s.errs = append(s.errs, fmt.Sprintf("log request %d: %v", l.N, err))
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
