package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Tool is one tool a harness offers the model, as its request lists it:
// a name and the JSON schema of its arguments.
type Tool struct {
	Name   string
	Schema json.RawMessage
}

// shellNames are the shell tools of the harnesses, best first: Claude
// Code's Bash, opencode's bash, Gemini CLI's run_shell_command and
// Codex's exec_command (unified exec), shell_command and shell.
var shellNames = []string{"Bash", "bash", "run_shell_command", "exec_command", "shell_command", "shell"}

// ErrNoShellTool is returned by [ShellCall] when a request offers no
// shell tool that the server knows how to call.
var ErrNoShellTool = fmt.Errorf("no shell tool among the request's tools (want one of %v)", shellNames)

// ShellCall picks the shell tool among tools and builds the arguments that
// run command with it, from the tool's own schema: the command goes in
// "command" or "cmd" (as ["bash", "-lc", command] when the schema wants an
// array), and a "description" the schema has gets a short one. It returns
// [ErrNoShellTool] when no tool fits.
func ShellCall(tools []Tool, command, description string) (name string, args json.RawMessage, err error) {
	var pick *Tool
	for _, n := range shellNames {
		i := slices.IndexFunc(tools, func(t Tool) bool { return t.Name == n })
		if i >= 0 {
			pick = &tools[i]
			break
		}
	}
	if pick == nil {
		return "", nil, ErrNoShellTool
	}
	var schema struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if len(pick.Schema) > 0 {
		if err := json.Unmarshal(pick.Schema, &schema); err != nil {
			return "", nil, fmt.Errorf("schema of tool %s: %w", pick.Name, err)
		}
	}
	a := map[string]any{}
	key := "command"
	if _, ok := schema.Properties["command"]; !ok {
		if _, ok := schema.Properties["cmd"]; ok {
			key = "cmd"
		}
	}
	if isArray(schema.Properties[key].Type) {
		a[key] = []string{"bash", "-lc", command}
	} else {
		a[key] = command
	}
	if _, ok := schema.Properties["description"]; ok {
		a["description"] = description
	}
	b, err := json.Marshal(a)
	if err != nil {
		return "", nil, fmt.Errorf("arguments of tool %s: %w", pick.Name, err)
	}
	return pick.Name, b, nil
}

// isArray reports whether a JSON schema "type" (a name, or a list of
// names) is or allows "array".
func isArray(t any) bool {
	switch t := t.(type) {
	case string:
		return strings.EqualFold(t, "array") // Gemini spells it ARRAY
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && strings.EqualFold(s, "array") {
				return true
			}
		}
	}
	return false
}
