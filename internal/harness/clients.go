package harness

import (
	"fmt"
	"os"
	"path/filepath"
)

// Client is one agent harness: the npm package that ships it, pinned, and
// how it is set up to talk to the scripted model and nothing else.
type Client struct {
	Name     string // short: claude, codex, gemini, opencode
	Title    string // as people know it
	Package  string // the npm package
	Version  string // pinned; .ci/run installs this one
	Bin      string // its command in node_modules/.bin
	Protocol Protocol
	// Empty is what the harness shows the model for a command that
	// printed nothing, when it says so in words.
	Empty string
	// Settings says, for platform teams, how the suite runs it.
	Settings []string
	// Notes are what a platform team should know of the harness itself,
	// whatever undosh does (seen in the trial and in this suite).
	Notes []string
	// Setup writes the client's configuration into home, for a model
	// served on 127.0.0.1:port, and returns its arguments and the
	// environment it needs beyond the run's own.
	Setup func(home string, port int, prompt string) (args, env []string, err error)
}

// prefixEnv overrides where the harnesses are installed (npm --prefix).
const prefixEnv = "UNDOSH_HARNESS_PREFIX"

// defaultPrefix is where .ci/run installs them.
const defaultPrefix = "/opt/undosh-harness"

// Prompt is what the harness is asked; the scripted model ignores it.
const Prompt = "Run the scripted steps, one shell command at a time."

// Clients are the harnesses the suite runs, pinned. .ci/run installs the
// same versions: keep the two together.
var Clients = []Client{
	{
		Name: "claude", Title: "Claude Code", Package: "@anthropic-ai/claude-code", Version: "2.1.197", Bin: "claude",
		Protocol: Anthropic, Empty: "(Bash completed with no output)",
		Settings: []string{
			"`claude -p PROMPT --output-format stream-json --verbose --dangerously-skip-permissions`",
			"`ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`, `ANTHROPIC_API_KEY`, `IS_SANDBOX=1` (lets root skip permissions)",
			"`DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`",
		},
		Notes: []string{
			"At its first tool call it takes a shell snapshot (`SNAPSHOT_FILE=~/.claude/shell-snapshots/… source ~/.bashrc …`) and sources it before every command; no setting turns that off. undosh classes the snapshot command from what `~/.bashrc` does: with Debian's default one it is read-only (the snapshot file is harness bookkeeping); a `~/.bashrc` that runs unknown code makes it a machine step, refused without root, after which Claude carries on without a snapshot and says nothing.",
			"It keeps its working directory in `/tmp/claude-XXXX-cwd` (`pwd -P >|` after each command), so `cd` carries over to the next call.",
			"On a timeout it moves the command to the background rather than killing it: a step still running keeps undosh from rolling back the steps beside it (they are kept, `undoctl back N`).",
		},
		Setup: func(home string, port int, prompt string) ([]string, []string, error) {
			args := []string{"-p", prompt, "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"}
			env := []string{
				fmt.Sprintf("ANTHROPIC_BASE_URL=http://127.0.0.1:%d", port),
				"ANTHROPIC_API_KEY=sk-ant-harness-test",
				"IS_SANDBOX=1",
				"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			}
			return args, env, nil
		},
	},
	{
		Name: "codex", Title: "Codex CLI", Package: "@openai/codex", Version: "0.171.0", Bin: "codex",
		Protocol: Responses,
		Settings: []string{
			"`codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --json PROMPT`",
			"`~/.codex/config.toml`: `model_provider = \"harness\"`, `[model_providers.harness]` with `base_url = \"http://127.0.0.1:PORT/v1\"`, `wire_api = \"responses\"`, `env_key`",
			"the shell snapshot is on (Codex's default)",
		},
		Notes: []string{
			"It refuses `rm -rf` itself (\"rm -f style commands are not permitted\"); the model gets that as the tool result.",
			"It takes a shell snapshot (`~/.codex/shell_snapshots`) and wraps every later command in ~340 lines that save and restore the environment around `. SNAPSHOT`, ending `exec '/bin/bash' -c 'CMD'`; without a snapshot (refused as non-root, or `--disable shell_snapshot`, `features.shell_snapshot = false`) each command is `/bin/bash -lc CMD`. The first command can run before the snapshot is there.",
			"Its snapshot command sources `~/.bashrc` and prints; undosh classes it from what `~/.bashrc` does (read-only with Debian's default). One that undosh refuses (without root, a `~/.bashrc` running unknown code) makes Codex log a WARN and carry on without a snapshot.",
			"Its own sandbox (`-s workspace-write`) must let undosh write its state directory (`sandbox_workspace_write.writable_roots`), or undosh refuses workspace steps, saying so; the fork engine cannot run inside it.",
			"It will not make its helper links under a `CODEX_HOME` in `/tmp` (a WARN at start): give it a real home.",
		},
		Setup: func(home string, port int, prompt string) ([]string, []string, error) {
			conf := fmt.Sprintf(`model = "harness-model"
model_provider = "harness"

[model_providers.harness]
name = "harness"
base_url = "http://127.0.0.1:%d/v1"
wire_api = "responses"
env_key = "HARNESS_API_KEY"
request_max_retries = 0
stream_max_retries = 0
`, port)
			if err := writeFile(filepath.Join(home, ".codex", "config.toml"), conf); err != nil {
				return nil, nil, err
			}
			args := []string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--json", prompt}
			return args, []string{"HARNESS_API_KEY=harness-test"}, nil
		},
	},
	{
		Name: "gemini", Title: "Gemini CLI", Package: "@google/gemini-cli", Version: "0.61.0", Bin: "gemini",
		Protocol: Gemini,
		Settings: []string{
			"`gemini -p PROMPT --yolo --skip-trust --output-format stream-json`",
			"`GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT`, `GEMINI_API_KEY`",
			"`~/.gemini/settings.json`: API-key auth, telemetry and usage statistics off, auto-update off",
		},
		Notes: []string{
			"It looks bash up in PATH and wraps every command as `shopt -u …; _bgpids_file=/tmp/gemini-shell-XXXXXX/bgpids.tmp; ( trap 'jobs -p > \"$_bgpids_file\"' EXIT; CMD ); …`.",
			"It refuses `$(…)` in a command itself (\"Command injection detected\").",
			"It wraps every tool result in `<untrusted_context>` and ends it with the process group's id; undosh's notices come inside the `Output:`.",
		},
		Setup: func(home string, port int, prompt string) ([]string, []string, error) {
			settings := `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true}
}
`
			if err := writeFile(filepath.Join(home, ".gemini", "settings.json"), settings); err != nil {
				return nil, nil, err
			}
			args := []string{"-p", prompt, "--yolo", "--skip-trust", "--output-format", "stream-json"}
			env := []string{
				fmt.Sprintf("GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:%d", port),
				"GEMINI_API_KEY=harness-test",
			}
			return args, env, nil
		},
	},
	{
		Name: "opencode", Title: "opencode", Package: "opencode-ai", Version: "1.18.33", Bin: "opencode",
		Protocol: Chat, Empty: "(no output)",
		Settings: []string{
			"`opencode run --format json PROMPT`",
			"`~/.config/opencode/opencode.json`: a provider with `\"npm\": \"@ai-sdk/openai-compatible\"` and `options.baseURL = \"http://127.0.0.1:PORT/v1\"`, its model as `model`",
			"`OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1`",
		},
		Notes: []string{
			"It runs `/bin/bash -c CMD` with no wrapper, so undosh classes each command as typed.",
			"Its tool result has the output only, not the exit status: a refusal or a rollback reaches the model only through undosh's notice lines.",
			"It spends a few hundred milliseconds of its own per call, which drowns undosh's cost in the session's time.",
		},
		Setup: func(home string, port int, prompt string) ([]string, []string, error) {
			conf := fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "harness/harness-model",
  "provider": {
    "harness": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "harness",
      "options": {"baseURL": "http://127.0.0.1:%d/v1", "apiKey": "harness-test"},
      "models": {"harness-model": {"name": "harness-model", "tool_call": true}}
    }
  }
}
`, port)
			if err := writeFile(filepath.Join(home, ".config", "opencode", "opencode.json"), conf); err != nil {
				return nil, nil, err
			}
			args := []string{"run", "--format", "json", prompt}
			env := []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1"}
			return args, env, nil
		},
	},
}

// writeFile writes body at path, making its directories.
func writeFile(path, body string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
