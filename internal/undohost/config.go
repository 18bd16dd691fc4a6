package undohost

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/template"
	"time"

	"github.com/goccy/go-yaml"
)

// Config is the configuration file of undohost (YAML, or JSON, which is
// YAML too). docs/undohost.md documents every field.
type Config struct {
	// Backend is "local" or "provider"; the --backend flag overrides it.
	Backend string `yaml:"backend"`
	// Sandboxes are the listeners, one sandbox each.
	Sandboxes []Sandbox `yaml:"sandboxes"`
	// Grace is how long SIGTERM waits for running operations before it
	// cancels them (they end abandoned). Default 10 s.
	Grace Duration `yaml:"grace"`
	// Provider holds the command templates of the provider backend.
	Provider *ProviderConfig `yaml:"provider"`
}

// Sandbox binds one listener to one sandbox.
type Sandbox struct {
	Name string `yaml:"name"`
	// Listen is unix:///PATH, tcp://127.0.0.1:PORT (loopback only) or
	// vsock://PORT.
	Listen string `yaml:"listen"`
	// TokenFile is where undohost writes the sandbox's current token
	// (0600), for setups that hand it to the guest out of band (a file
	// mounted into a container, a test). Default <state>/tokens/<name>.
	TokenFile string `yaml:"token_file"`
}

// ProviderConfig is the provider backend: one argv template per
// operation. See docs/undohost.md for the fields a template can use and
// what each command must print and return.
type ProviderConfig struct {
	// Vars are free values for the templates: {{.Vars.name}}.
	Vars map[string]string `yaml:"vars"`
	// Required.
	Fork     []string `yaml:"fork"`
	Network  []string `yaml:"network"`
	Exec     []string `yaml:"exec"`
	Promote  []string `yaml:"promote"`
	Delete   []string `yaml:"delete"`
	Snapshot []string `yaml:"snapshot"`
	Restore  []string `yaml:"restore"`
	// Optional.
	DeleteSnapshot []string `yaml:"delete_snapshot"`
	// Notify, when set, marks a provider that captures memory: every VM
	// its commands resume from a capture (the original after a fork or a
	// checkpoint, the copy before its step, the promoted copy, the
	// restored VM) gets a new generation (new token), and Notify runs
	// with the WHO_YOU_ARE JSON on its stdin to deliver it on the control
	// channel. It must use {{.Copy}}: the copy to tell, or "" for the
	// sandbox's VM.
	Notify []string `yaml:"notify"`
	// KeepLast bounds the checkpoints kept per sandbox when a request
	// leaves it 0 (default 32); TTL bounds their age (default: none).
	KeepLast int      `yaml:"keep_last"`
	TTL      Duration `yaml:"ttl"`
}

// Duration is a time.Duration written as "10s" in the file.
type Duration time.Duration

// UnmarshalText reads a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// LoadConfig reads and checks a configuration file. Unknown fields are
// errors, so that a misspelt one is not silently ignored.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if c.Provider != nil {
		if err := c.Provider.check(); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	return &c, nil
}

func (p *ProviderConfig) check() error {
	var missing []string
	for _, t := range []struct {
		name string
		argv []string
	}{{"fork", p.Fork}, {"network", p.Network}, {"exec", p.Exec}, {"promote", p.Promote},
		{"delete", p.Delete}, {"snapshot", p.Snapshot}, {"restore", p.Restore}} {
		if len(t.argv) == 0 {
			missing = append(missing, t.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("provider: no command for %s", strings.Join(missing, ", "))
	}
	if len(p.Notify) > 0 && !namesCopy(p.Notify) {
		return errors.New(`provider: notify must use {{.Copy}}: it is the copy to tell before its step, and empty for the sandbox's VM`)
	}
	for name, argv := range map[string][]string{"fork": p.Fork, "network": p.Network, "exec": p.Exec,
		"promote": p.Promote, "delete": p.Delete, "snapshot": p.Snapshot, "restore": p.Restore,
		"delete_snapshot": p.DeleteSnapshot, "notify": p.Notify} {
		if _, err := compile(argv); err != nil {
			return fmt.Errorf("provider: %s: %w", name, err)
		}
	}
	return nil
}

// Lists that an argv element spliced in whole when it is exactly one of
// these: "{{.Argv}}" becomes as many elements as the command has.
var spliced = map[string]func(d *Data) []string{
	"{{.Argv}}":  func(d *Data) []string { return d.Argv },
	"{{.Env}}":   func(d *Data) []string { return d.Env },
	"{{.Allow}}": func(d *Data) []string { return d.Allow },
}

// argvTemplate is a compiled argv: each element is a list or a template.
type argvTemplate []func(d *Data) ([]string, error)

var funcs = template.FuncMap{"join": strings.Join}

func compile(argv []string) (argvTemplate, error) {
	var out argvTemplate
	for i, a := range argv {
		if f, ok := spliced[strings.ReplaceAll(a, " ", "")]; ok {
			out = append(out, func(d *Data) ([]string, error) { return f(d), nil })
			continue
		}
		t, err := template.New(fmt.Sprint(i)).Funcs(funcs).Option("missingkey=error").Parse(a)
		if err != nil {
			return nil, err
		}
		out = append(out, func(d *Data) ([]string, error) {
			var b strings.Builder
			if err := t.Execute(&b, d); err != nil {
				return nil, err
			}
			return []string{b.String()}, nil
		})
	}
	return out, nil
}

// render gives the argv for d.
func (t argvTemplate) render(d *Data) ([]string, error) {
	if len(t) == 0 {
		return nil, errors.New("no command")
	}
	var argv []string
	for _, f := range t {
		a, err := f(d)
		if err != nil {
			return nil, err
		}
		argv = append(argv, a...)
	}
	return argv, nil
}
