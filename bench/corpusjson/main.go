// Command corpusjson prints the commands of the labelled corpus files as
// JSON strings, one per line, for `undoctl explain --json-lines`.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, name := range os.Args[1:] {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "corpusjson:", err)
			os.Exit(1)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
				continue
			}
			_, cmd, ok := strings.Cut(line, "\t")
			if !ok {
				continue
			}
			if strings.HasPrefix(cmd, `"`) {
				if err := json.Unmarshal([]byte(cmd), &cmd); err != nil {
					fmt.Fprintf(os.Stderr, "corpusjson: %s: %v\n", name, err)
					os.Exit(1)
				}
			}
			b, _ := json.Marshal(cmd)
			w.Write(b)
			w.WriteByte('\n')
		}
		f.Close()
	}
}
