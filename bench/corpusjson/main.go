// Command corpusjson prints the commands of the labelled corpus files as
// JSON strings, one per line, for `undoctl explain --json-lines`.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/undosh/undosh/internal/corpus"
)

func main() {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, name := range os.Args[1:] {
		lines, err := corpus.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "corpusjson:", err)
			os.Exit(1)
		}
		for _, l := range lines {
			b, _ := json.Marshal(l.Command)
			w.Write(b)
			w.WriteByte('\n')
		}
	}
}
