package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The shell tools as the harnesses offer them (trimmed to what matters).
var (
	claudeBash  = Tool{Name: "Bash", Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"},"description":{"type":"string"},"run_in_background":{"type":"boolean"}},"required":["command"]}`)}
	opencodeSh  = Tool{Name: "bash", Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"},"description":{"type":"string"}},"required":["command","description"]}`)}
	geminiShell = Tool{Name: "run_shell_command", Schema: json.RawMessage(`{"type":"OBJECT","properties":{"command":{"type":"STRING"},"description":{"type":"STRING"},"dir_path":{"type":"STRING"}},"required":["command"]}`)}
	codexExec   = Tool{Name: "exec_command", Schema: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"},"workdir":{"type":"string"},"yield_time_ms":{"type":"number"}},"required":["cmd"]}`)}
	codexShell  = Tool{Name: "shell", Schema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}},"workdir":{"type":"string"}},"required":["command"]}`)}
	otherTool   = Tool{Name: "Read", Schema: json.RawMessage(`{"type":"object","properties":{"file_path":{"type":"string"}}}`)}
)

func TestShellCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		tools    []Tool
		wantName string
		wantArgs string
		wantErr  error
	}{
		{"claude", []Tool{otherTool, claudeBash}, "Bash", `{"command":"ls -l","description":"d"}`, nil},
		{"opencode", []Tool{opencodeSh, otherTool}, "bash", `{"command":"ls -l","description":"d"}`, nil},
		{"gemini, upper-case types", []Tool{geminiShell}, "run_shell_command", `{"command":"ls -l","description":"d"}`, nil},
		{"codex unified exec", []Tool{codexExec}, "exec_command", `{"cmd":"ls -l"}`, nil},
		{"codex shell, argv", []Tool{codexShell}, "shell", `{"command":["bash","-lc","ls -l"]}`, nil},
		{"unified exec preferred to shell", []Tool{codexShell, codexExec}, "exec_command", `{"cmd":"ls -l"}`, nil},
		{"no schema", []Tool{{Name: "bash"}}, "bash", `{"command":"ls -l"}`, nil},
		{"no shell tool", []Tool{otherTool}, "", "", ErrNoShellTool},
		{"no tools", nil, "", "", ErrNoShellTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name, args, err := ShellCall(tt.tools, "ls -l", "d")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if name != tt.wantName || string(args) != tt.wantArgs {
				t.Errorf("ShellCall = %s %s, want %s %s", name, args, tt.wantName, tt.wantArgs)
			}
		})
	}
}

// events reads server-sent events: the data of each, in order.
func events(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// decodeCall reads back, as a harness would, the tool call (name and
// arguments) or the text that an encoder wrote.
func decodeCall(t *testing.T, p Protocol, stream bool, b []byte) (name, args, text string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v in %s", p, err, b)
		}
	}
	if !stream {
		var v map[string]any
		must(json.Unmarshal(b, &v))
		switch p {
		case Anthropic:
			var m struct {
				Content []struct {
					Type, Name, Text string
					Input            json.RawMessage
				}
			}
			must(json.Unmarshal(b, &m))
			c := m.Content[0]
			return c.Name, string(c.Input), c.Text
		case Responses:
			var m struct {
				Output []struct {
					Type, Name, Arguments string
					Content               []struct{ Text string }
				}
			}
			must(json.Unmarshal(b, &m))
			o := m.Output[0]
			if o.Type == "message" {
				return "", "", o.Content[0].Text
			}
			return o.Name, o.Arguments, ""
		case Chat:
			var m struct {
				Choices []struct {
					Message struct {
						Content   *string
						ToolCalls []struct {
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
				}
			}
			must(json.Unmarshal(b, &m))
			msg := m.Choices[0].Message
			if len(msg.ToolCalls) > 0 {
				return msg.ToolCalls[0].Function.Name, msg.ToolCalls[0].Function.Arguments, ""
			}
			return "", "", *msg.Content
		case Gemini:
			return decodeGeminiChunk(t, b)
		}
	}
	evs := events(t, b)
	switch p {
	case Anthropic:
		var partial strings.Builder
		for _, e := range evs {
			var ev struct {
				Type         string
				ContentBlock struct{ Type, Name string } `json:"content_block"`
				Delta        struct {
					Type, Text  string
					PartialJSON string `json:"partial_json"`
				}
			}
			must(json.Unmarshal([]byte(e), &ev))
			switch {
			case ev.Type == "content_block_start" && ev.ContentBlock.Type == "tool_use":
				name = ev.ContentBlock.Name
			case ev.Delta.Type == "input_json_delta":
				partial.WriteString(ev.Delta.PartialJSON)
			case ev.Delta.Type == "text_delta":
				text += ev.Delta.Text
			}
		}
		return name, partial.String(), text
	case Responses:
		for _, e := range evs {
			var ev struct {
				Type string
				Item struct {
					Type, Name, Arguments string
					Content               []struct{ Text string }
				}
			}
			must(json.Unmarshal([]byte(e), &ev))
			if ev.Type == "response.output_item.done" {
				if ev.Item.Type == "message" {
					text = ev.Item.Content[0].Text
				} else {
					name, args = ev.Item.Name, ev.Item.Arguments
				}
			}
		}
		if evs[len(evs)-1] == "" || !strings.Contains(evs[len(evs)-1], "response.completed") {
			t.Errorf("responses: the stream does not end with response.completed")
		}
		return name, args, text
	case Chat:
		for _, e := range evs {
			if e == "[DONE]" {
				continue
			}
			var ev struct {
				Choices []struct {
					Delta struct {
						Content   *string
						ToolCalls []struct {
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
				}
			}
			must(json.Unmarshal([]byte(e), &ev))
			for _, c := range ev.Choices {
				for _, tc := range c.Delta.ToolCalls {
					name += tc.Function.Name
					args += tc.Function.Arguments
				}
				if c.Delta.Content != nil {
					text += *c.Delta.Content
				}
			}
		}
		if evs[len(evs)-1] != "[DONE]" {
			t.Errorf("chat: the stream does not end with [DONE]")
		}
		return name, args, text
	case Gemini:
		return decodeGeminiChunk(t, []byte(evs[0]))
	}
	return "", "", ""
}

func decodeGeminiChunk(t *testing.T, b []byte) (name, args, text string) {
	t.Helper()
	var m struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text         string
					FunctionCall *struct {
						Name string
						Args json.RawMessage
					}
				}
			}
		}
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("gemini: %v in %s", err, b)
	}
	p := m.Candidates[0].Content.Parts[0]
	if p.FunctionCall != nil {
		return p.FunctionCall.Name, string(p.FunctionCall.Args), ""
	}
	return "", "", p.Text
}

var encoders = map[Protocol]func(io.Writer, string, Reply, bool) error{
	Anthropic: EncodeAnthropic, Responses: EncodeResponses, Chat: EncodeChat, Gemini: EncodeGemini,
}

func TestEncoders(t *testing.T) {
	t.Parallel()
	call := Reply{CallID: "call_step03", Tool: "Bash", Args: json.RawMessage(`{"command":"sed -i 's/a/b/' \"x y\"\nls"}`)}
	final := Reply{Text: "All steps are done."}
	for p, enc := range encoders {
		for _, stream := range []bool{false, true} {
			for _, rep := range []Reply{call, final} {
				t.Run(fmt.Sprintf("%s/stream=%v/%s", p, stream, rep.Tool), func(t *testing.T) {
					t.Parallel()
					var b bytes.Buffer
					if err := enc(&b, "m", rep, stream); err != nil {
						t.Fatal(err)
					}
					name, args, text := decodeCall(t, p, stream, b.Bytes())
					if rep.Tool == "" {
						if name != "" || text != rep.Text {
							t.Errorf("got call %q, text %q; want text %q", name, text, rep.Text)
						}
						return
					}
					if name != rep.Tool {
						t.Errorf("tool = %q, want %q", name, rep.Tool)
					}
					if diff := cmp.Diff(decodeArgs(t, rep.Args), decodeArgs(t, json.RawMessage(args))); diff != "" {
						t.Errorf("arguments (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

func decodeArgs(t *testing.T, b json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("arguments %s: %v", b, err)
	}
	return m
}

// request builds a request of protocol p that offers tools and carries
// the given tool results, as a harness would send it after that many
// steps.
func request(p Protocol, tools []Tool, results []string) []byte {
	var v any
	switch p {
	case Anthropic:
		var ts []any
		for _, t := range tools {
			ts = append(ts, map[string]any{"name": t.Name, "input_schema": t.Schema})
		}
		msgs := []any{map[string]any{"role": "user", "content": "go"}}
		for i, r := range results {
			id := fmt.Sprintf("call_step%02d", i+1)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": r}}})
		}
		v = map[string]any{"model": "m", "stream": true, "tools": ts, "messages": msgs}
	case Responses:
		var ts []any
		for _, t := range tools {
			ts = append(ts, map[string]any{"type": "function", "name": t.Name, "parameters": t.Schema})
		}
		input := []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "go"}}}}
		for i, r := range results {
			id := fmt.Sprintf("call_step%02d", i+1)
			input = append(input, map[string]any{"type": "function_call", "call_id": id, "name": "exec_command", "arguments": "{}"},
				map[string]any{"type": "function_call_output", "call_id": id, "output": r})
		}
		v = map[string]any{"model": "m", "stream": true, "tools": ts, "input": input}
	case Chat:
		var ts []any
		for _, t := range tools {
			ts = append(ts, map[string]any{"type": "function", "function": map[string]any{"name": t.Name, "parameters": t.Schema}})
		}
		msgs := []any{map[string]any{"role": "user", "content": "go"}}
		for i, r := range results {
			id := fmt.Sprintf("call_step%02d", i+1)
			msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "bash", "arguments": "{}"}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": r})
		}
		v = map[string]any{"model": "m", "stream": true, "tools": ts, "messages": msgs}
	case Gemini:
		var fs []any
		for _, t := range tools {
			fs = append(fs, map[string]any{"name": t.Name, "parametersJsonSchema": t.Schema})
		}
		contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "go"}}}}
		for _, r := range results {
			contents = append(contents, map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run_shell_command", "args": map[string]any{}}}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "run_shell_command", "response": map[string]any{"output": r}}}}})
		}
		v = map[string]any{"contents": contents, "tools": []any{map[string]any{"functionDeclarations": fs}}}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var decoders = map[Protocol]func([]byte) (Turn, error){
	Anthropic: DecodeAnthropic, Responses: DecodeResponses, Chat: DecodeChat, Gemini: DecodeGemini,
}

// shellTool is each protocol's harness's shell tool.
var shellTool = map[Protocol]Tool{Anthropic: claudeBash, Responses: codexExec, Chat: opencodeSh, Gemini: geminiShell}

func TestDecoders(t *testing.T) {
	t.Parallel()
	results := []string{"index.js\nsrc", "", "Exit code 1\nundosh: step 3 failed (exit 1): rolled back"}
	for p, dec := range decoders {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			turn, err := dec(request(p, []Tool{otherTool, shellTool[p]}, results))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(results, turn.Results); diff != "" {
				t.Errorf("results (-want +got):\n%s", diff)
			}
			if len(turn.Tools) != 2 || turn.Tools[1].Name != shellTool[p].Name {
				t.Errorf("tools = %v", turn.Tools)
			}
		})
	}
	t.Run("blocks", func(t *testing.T) {
		t.Parallel()
		body := `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}]}]}`
		turn, err := DecodeAnthropic([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"one\ntwo"}, turn.Results); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		t.Parallel()
		for p, dec := range decoders {
			if _, err := dec([]byte("{")); err == nil {
				t.Errorf("%s: decoded a broken request", p)
			}
		}
	})
}

// TestServer plays a whole script through each protocol over HTTP, as a
// harness would: the server calls the shell tool with each command in
// turn, records each result, and ends with a text.
func TestServer(t *testing.T) {
	t.Parallel()
	paths := map[Protocol]string{Anthropic: "/v1/messages", Responses: "/v1/responses", Chat: "/v1/chat/completions",
		Gemini: "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"}
	script := []string{"ls", "sed -i 's/a/b/' f", "pwd"}
	for p := range decoders {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			var log bytes.Buffer
			done := 0
			srv := &Server{Script: script, Log: &log, OnDone: func() { done++ }}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			post := func(body []byte) (string, string, string) {
				t.Helper()
				resp, err := http.Post(hs.URL+paths[p], "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				return decodeCall(t, p, true, b)
			}
			// A side question without tools gets a text, and no step.
			if name, _, text := post(request(p, nil, nil)); name != "" || text == "" {
				t.Errorf("side question: call %q, text %q", name, text)
			}
			var results []string
			for i, cmd := range script {
				name, args, _ := post(request(p, []Tool{shellTool[p]}, results))
				if name != shellTool[p].Name || !strings.Contains(args, jsonString(cmd)) {
					t.Fatalf("step %d: call %s %s, want %s with %q", i+1, name, args, shellTool[p].Name, cmd)
				}
				// The same request again (a retry) gets the same call.
				if again, args2, _ := post(request(p, []Tool{shellTool[p]}, results)); again != name || args2 != args {
					t.Errorf("step %d again: %s %s", i+1, again, args2)
				}
				results = append(results, fmt.Sprintf("result %d", i+1))
			}
			if name, _, text := post(request(p, []Tool{shellTool[p]}, results)); name != "" || text != "All steps are done." {
				t.Errorf("after the script: call %q, text %q", name, text)
			}
			if done != 1 {
				t.Errorf("OnDone called %d times, want 1", done)
			}
			got := srv.Results()
			if len(got) != len(script) {
				t.Fatalf("%d results recorded, want %d", len(got), len(script))
			}
			for i, r := range got {
				if r.Step != i || r.Command != script[i] || r.Text != results[i] || r.Latency <= 0 {
					t.Errorf("result %d = %+v", i, r)
				}
			}
			if e := srv.Errors(); len(e) > 0 {
				t.Errorf("server errors: %v", e)
			}
			if n := strings.Count(log.String(), "\n"); n != srv.Requests() || n != 2*len(script)+2 {
				t.Errorf("%d requests logged, %d served, want %d", n, srv.Requests(), 2*len(script)+2)
			}
		})
	}
}

// jsonString is s as it appears inside a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// FuzzDecode feeds every decoder arbitrary bodies: none may panic, and
// a body one of them takes must give back as many results as it holds
// result entries.
func FuzzDecode(f *testing.F) {
	for p := range decoders {
		f.Add(request(p, []Tool{shellTool[p]}, []string{"a", "b\nc"}))
		f.Add(request(p, nil, nil))
	}
	f.Add([]byte(`{"messages":[{"content":"x"}],"input":"x","contents":[{"parts":[{"functionResponse":{"response":7}}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"tool","content":[{"text":null}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for p, dec := range decoders {
			turn, err := dec(body)
			if err != nil {
				continue
			}
			if _, _, err := ShellCall(turn.Tools, "ls", "d"); err != nil && !errors.Is(err, ErrNoShellTool) && !strings.Contains(err.Error(), "schema") {
				t.Errorf("%s: ShellCall: %v", p, err)
			}
		}
	})
}

// FuzzRoundTrip checks that decoding the request a harness would send
// gives back the tool results in it, whatever their text.
func FuzzRoundTrip(f *testing.F) {
	f.Add("index.js\nsrc\n", "")
	f.Add("Exit code 126\nundosh: refused: …", "\x00\xff")
	f.Add(`{"output":"x"}`, `["a"]`)
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8Valid(a) || !utf8Valid(b) {
			t.Skip("JSON carries text: invalid UTF-8 does not survive encoding")
		}
		want := []string{a, b}
		for p, dec := range decoders {
			turn, err := dec(request(p, []Tool{shellTool[p]}, want))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if diff := cmp.Diff(want, turn.Results); diff != "" {
				t.Errorf("%s: results (-want +got):\n%s", p, diff)
			}
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\ufffd") == s }
