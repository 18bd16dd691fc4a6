package session

import (
	"slices"
	"strings"
	"testing"
)

func TestDecoder(t *testing.T) {
	in := "hello\x0012\x00" +
		"junk\x00" +
		"begin\x00p42\x001\x00/w\x00ignoreboth\x00\x001\x00500\x001\x00   13  echo x\n\x00declare -x A=\"b\"\n\x00" +
		"end\x00e1\x00130\x00"
	d := newDecoder(strings.NewReader(in))
	var got []message
	for {
		m, err := d.next()
		if err != nil {
			break
		}
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("got %d messages, want 3: %+v", len(got), got)
	}
	if got[0].kind != "hello" || got[0].hist != 12 {
		t.Errorf("hello = %+v", got[0])
	}
	b := got[1]
	if b.kind != "begin" || b.id != "p42" || b.begin.pid != 42 || b.status != 1 || b.begin.cwd != "/w" ||
		b.begin.histControl != "ignoreboth" || !b.begin.history || b.begin.histSize != "500" || !b.begin.forced {
		t.Errorf("begin = %+v", b)
	}
	if n, text := parseHistoryEntry(b.begin.entry); n != 13 || text != "echo x" {
		t.Errorf("entry = %d %q", n, text)
	}
	if got[2].kind != "end" || got[2].id != "e1" || got[2].status != 130 {
		t.Errorf("end = %+v", got[2])
	}
}

func TestParseHistoryEntry(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		text string
	}{
		{"    1  ls\n", 1, "ls"},
		{"  120* echo edited\n", 120, "echo edited"},
		{"100000  for i in 1; do\n echo $i\ndone\n", 100000, "for i in 1; do\n echo $i\ndone"},
		{"    7   leading space\n", 7, " leading space"},
		{"", 0, ""},
		{"x  y", 0, ""},
	} {
		n, text := parseHistoryEntry(tt.in)
		if n != tt.n || text != tt.text {
			t.Errorf("parseHistoryEntry(%q) = %d %q, want %d %q", tt.in, n, text, tt.n, tt.text)
		}
	}
}

func TestParseExports(t *testing.T) {
	env, m := parseExports("declare -x HOME=\"/root\"\ndeclare -x EMPTY=\"\"\ndeclare -x UNSET\ndeclare -x Q=\"a \\\"b\\\" \\$c \\\\ \\`d\\`\nnew line\"\nexport P=\"posix\"\n")
	want := []string{"HOME=/root", "EMPTY=", "Q=a \"b\" $c \\ `d`\nnew line", "P=posix"}
	if !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
	if _, ok := m["UNSET"]; ok {
		t.Errorf("an exported variable without a value is not in the environment")
	}
}

func TestCompleteCommand(t *testing.T) {
	for _, tt := range []struct{ in, cmd string }{
		{"ls\n", "ls\n"},
		{"ls\necho b\n", "ls\n"},
		{"for i in 1; do\necho $i\ndone\nls\n", "for i in 1; do\necho $i\ndone\n"},
		{"cat <<EOF\nx\nEOF\n", "cat <<EOF\nx\nEOF\n"},
		{"echo 'a\nb'\n", "echo 'a\nb'\n"},
		{"echo \\\nb\n", "echo \\\nb\n"},
		{"if true; then\n", ""},
		{"ls", ""},
		{"echo )\n", "echo )\n"}, // a syntax error goes to bash, which reports it
	} {
		cmd, ok := completeCommand(tt.in)
		if cmd != tt.cmd || ok != (tt.cmd != "") {
			t.Errorf("completeCommand(%q) = %q, %v; want %q", tt.in, cmd, ok, tt.cmd)
		}
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte("hello\x0012\x00begin\x00p1\x000\x00/\x00\x00\x001\x00\x001\x00  1  ls\n\x00\x00end\x00e1\x000\x00"))
	f.Add([]byte("end\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDecoder(strings.NewReader(string(data)))
		for range 1000 {
			m, err := d.next()
			if err != nil {
				return
			}
			switch m.kind {
			case "hello", "begin", "end":
			default:
				t.Fatalf("decoded an unknown kind %q", m.kind)
			}
			parseHistoryEntry(m.begin.entry)
			parseExports(m.begin.exports)
		}
	})
}

func TestHistIgnored(t *testing.T) {
	for _, tt := range []struct {
		ignore, line, prev string
		want               bool
	}{
		{"", "ls", "", false},
		{"ls", "ls", "", true},
		{"ls", "ls -l", "", false},
		{"ls*:cd *", "cd /tmp", "", true},
		{"&", "pwd", "pwd", true},
		{"&", "pwd", "ls", false},
		{"&", "a*", "a*", true},
		{"&", "ab", "a*", false},
		{"x\\:y", "x:y", "", true},
		{"[ \t]*", " secret", "", true},
	} {
		if got := histIgnored(tt.ignore, tt.line, tt.prev); got != tt.want {
			t.Errorf("histIgnored(%q, %q, %q) = %v, want %v", tt.ignore, tt.line, tt.prev, got, tt.want)
		}
	}
}
