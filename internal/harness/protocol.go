package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Protocol is a model API the server speaks.
type Protocol string

// The protocols, one per API family the harnesses use.
const (
	Anthropic Protocol = "anthropic" // Anthropic Messages: Claude Code
	Responses Protocol = "responses" // OpenAI Responses: Codex
	Chat      Protocol = "chat"      // OpenAI Chat Completions: opencode
	Gemini    Protocol = "gemini"    // Gemini generateContent: Gemini CLI
)

// Turn is what the server reads from one request: the model asked for,
// whether to stream, the tools on offer and the text of every tool result
// the harness has sent back so far, oldest first. The step a request is at
// is len(Results): the server keeps no other state.
type Turn struct {
	Model   string
	Stream  bool
	Tools   []Tool
	Results []string
	// JSON is set when the request asks for a JSON answer (Gemini CLI's
	// side questions: which model, who speaks next).
	JSON bool
}

// Reply is what the server answers a [Turn] with: one call of Tool with
// Args, when Tool is set, or else the final Text.
type Reply struct {
	CallID string
	Tool   string
	Args   json.RawMessage
	Text   string
}

// textOf reads a content field that is either a string or a list of
// blocks with text ({"type": "text", "text": ...}, input_text, output_text),
// joining the blocks' texts with newlines. Anything else gives its JSON.
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Text != nil {
				parts = append(parts, *b.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return string(raw)
}

// DecodeAnthropic reads an Anthropic Messages request.
func DecodeAnthropic(body []byte) (Turn, error) {
	var r struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		Tools  []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return Turn{}, fmt.Errorf("decode anthropic request: %w", err)
	}
	t := Turn{Model: r.Model, Stream: r.Stream}
	for _, tool := range r.Tools {
		t.Tools = append(t.Tools, Tool{Name: tool.Name, Schema: tool.InputSchema})
	}
	for _, m := range r.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string: no tool result in it
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				t.Results = append(t.Results, textOf(b.Content))
			}
		}
	}
	return t, nil
}

// DecodeResponses reads an OpenAI Responses request.
func DecodeResponses(body []byte) (Turn, error) {
	var r struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		Tools  []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"tools"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return Turn{}, fmt.Errorf("decode responses request: %w", err)
	}
	t := Turn{Model: r.Model, Stream: r.Stream}
	for _, tool := range r.Tools {
		name := tool.Name
		if name == "" {
			name = tool.Type // local_shell has no name
		}
		t.Tools = append(t.Tools, Tool{Name: name, Schema: tool.Parameters})
	}
	var items []struct {
		Type   string          `json:"type"`
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(r.Input, &items) == nil {
		for _, it := range items {
			switch it.Type {
			case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
				t.Results = append(t.Results, textOf(it.Output))
			}
		}
	}
	return t, nil
}

// DecodeChat reads an OpenAI Chat Completions request.
func DecodeChat(body []byte) (Turn, error) {
	var r struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
		Tools  []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return Turn{}, fmt.Errorf("decode chat request: %w", err)
	}
	t := Turn{Model: r.Model, Stream: r.Stream}
	for _, tool := range r.Tools {
		t.Tools = append(t.Tools, Tool{Name: tool.Function.Name, Schema: tool.Function.Parameters})
	}
	for _, m := range r.Messages {
		if m.Role == "tool" {
			t.Results = append(t.Results, textOf(m.Content))
		}
	}
	return t, nil
}

// DecodeGemini reads a Gemini generateContent request. The model and
// whether to stream are in the URL, not the body: the caller sets them.
func DecodeGemini(body []byte) (Turn, error) {
	var r struct {
		Tools []struct {
			FunctionDeclarations []struct {
				Name                 string          `json:"name"`
				Parameters           json.RawMessage `json:"parameters"`
				ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		Contents []struct {
			Parts []struct {
				FunctionResponse *struct {
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		GenerationConfig struct {
			ResponseMimeType string `json:"responseMimeType"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return Turn{}, fmt.Errorf("decode gemini request: %w", err)
	}
	t := Turn{JSON: r.GenerationConfig.ResponseMimeType == "application/json"}
	for _, tool := range r.Tools {
		for _, f := range tool.FunctionDeclarations {
			s := f.ParametersJSONSchema
			if len(s) == 0 {
				s = f.Parameters
			}
			t.Tools = append(t.Tools, Tool{Name: f.Name, Schema: s})
		}
	}
	for _, c := range r.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse == nil {
				continue
			}
			var out struct {
				Output json.RawMessage `json:"output"`
			}
			if json.Unmarshal(p.FunctionResponse.Response, &out) == nil && len(out.Output) > 0 {
				t.Results = append(t.Results, textOf(out.Output))
			} else {
				t.Results = append(t.Results, string(p.FunctionResponse.Response))
			}
		}
	}
	return t, nil
}

// sse writes server-sent events, flushing after each one so that the
// harness sees every event as it is sent.
type sse struct {
	w   io.Writer
	err error
}

// event writes one event: an "event:" line when name is set, then data,
// the JSON encoding of v.
func (s *sse) event(name string, v any) {
	if s.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.err = fmt.Errorf("encode event %s: %w", name, err)
		return
	}
	s.raw(name, string(b))
}

// raw writes one event whose data is already encoded.
func (s *sse) raw(name, data string) {
	if s.err != nil {
		return
	}
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: " + data + "\n\n")
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		s.err = fmt.Errorf("write event %s: %w", name, err)
		return
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// splitHalf cuts s in two, so that a streamed argument arrives as more
// than one delta, as it does from a real model.
func splitHalf(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	return []string{s[:len(s)/2], s[len(s)/2:]}
}

// EncodeAnthropic writes rep as an Anthropic Messages response: server-sent
// events (message_start, one content block, with input_json_delta for a
// tool_use, message_delta, message_stop) when stream is set, else one JSON
// message.
func EncodeAnthropic(w io.Writer, model string, rep Reply, stream bool) error {
	stop := "end_turn"
	block := map[string]any{"type": "text", "text": rep.Text}
	if rep.Tool != "" {
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": rep.CallID, "name": rep.Tool, "input": rep.Args}
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
	msg := map[string]any{
		"id": "msg_" + callSuffix(rep), "type": "message", "role": "assistant", "model": model,
		"stop_reason": stop, "stop_sequence": nil, "usage": usage,
		"content": []any{block},
	}
	if !stream {
		return json.NewEncoder(w).Encode(msg)
	}
	s := &sse{w: w}
	msg["content"] = []any{}
	msg["stop_reason"] = nil
	s.event("message_start", map[string]any{"type": "message_start", "message": msg})
	if rep.Tool != "" {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": rep.CallID, "name": rep.Tool, "input": map[string]any{}}})
		for _, part := range splitHalf(string(rep.Args)) {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
	} else {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": rep.Text}})
	}
	s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
	return s.err
}

// callSuffix names a reply in the ids that go with it.
func callSuffix(rep Reply) string {
	if rep.CallID != "" {
		return rep.CallID
	}
	return "final"
}

// EncodeResponses writes rep as an OpenAI Responses stream
// (response.created, response.output_item.added and .done for one
// function_call or message item, response.completed), or as one JSON
// response object when stream is not set.
func EncodeResponses(w io.Writer, model string, rep Reply, stream bool) error {
	id := "resp_" + callSuffix(rep)
	var item map[string]any
	if rep.Tool != "" {
		item = map[string]any{"type": "function_call", "id": "fc_" + rep.CallID, "call_id": rep.CallID,
			"name": rep.Tool, "arguments": string(rep.Args), "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": "msg_" + callSuffix(rep), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}}
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 10, "total_tokens": 20,
		"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	resp := map[string]any{"id": id, "object": "response", "model": model, "status": "completed",
		"output": []any{item}, "usage": usage}
	if !stream {
		return json.NewEncoder(w).Encode(resp)
	}
	s := &sse{w: w}
	s.event("response.created", map[string]any{"type": "response.created",
		"response": map[string]any{"id": id, "object": "response", "model": model, "status": "in_progress", "output": []any{}}})
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	if rep.Tool != "" {
		added["arguments"] = ""
	}
	s.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": added})
	if rep.Tool != "" {
		for _, part := range splitHalf(string(rep.Args)) {
			s.event("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta",
				"item_id": item["id"], "output_index": 0, "delta": part})
		}
		s.event("response.function_call_arguments.done", map[string]any{"type": "response.function_call_arguments.done",
			"item_id": item["id"], "output_index": 0, "arguments": string(rep.Args)})
	} else {
		s.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta",
			"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": rep.Text})
	}
	s.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	s.event("response.completed", map[string]any{"type": "response.completed", "response": resp})
	return s.err
}

// EncodeChat writes rep as an OpenAI Chat Completions stream (a chunk
// with the tool call or the text, a chunk with the finish reason and
// usage, then [DONE]), or as one JSON completion when stream is not set.
func EncodeChat(w io.Writer, model string, rep Reply, stream bool) error {
	id := "chatcmpl-" + callSuffix(rep)
	finish := "stop"
	msg := map[string]any{"role": "assistant", "content": rep.Text}
	if rep.Tool != "" {
		finish = "tool_calls"
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": rep.CallID, "type": "function",
			"function": map[string]any{"name": rep.Tool, "arguments": string(rep.Args)}}}}
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
	if !stream {
		return json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
	}
	chunk := func(delta map[string]any, finish any, usage any) map[string]any {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		return c
	}
	s := &sse{w: w}
	s.event("", chunk(msg, nil, nil))
	s.event("", chunk(map[string]any{}, finish, usage))
	s.raw("", "[DONE]")
	return s.err
}

// EncodeGemini writes rep as a Gemini generateContent response: one
// candidate whose part is a functionCall or text, as one server-sent event
// when stream is set, else as one JSON object.
func EncodeGemini(w io.Writer, model string, rep Reply, stream bool) error {
	part := map[string]any{"text": rep.Text}
	if rep.Tool != "" {
		part = map[string]any{"functionCall": map[string]any{"id": rep.CallID, "name": rep.Tool, "args": rep.Args}}
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{"index": 0, "finishReason": "STOP",
			"content": map[string]any{"role": "model", "parts": []any{part}}}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
		"modelVersion":  model,
	}
	if !stream {
		return json.NewEncoder(w).Encode(resp)
	}
	s := &sse{w: w}
	s.event("", resp)
	return s.err
}
